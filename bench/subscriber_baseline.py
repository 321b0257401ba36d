"""Baseline of the subscriber import benchmark: a plain Spark Structured Streaming job that reads
the package topic with Spark's Kafka source and MERGEs the nodes into a Delta table keyed by
path, exactly once through the idiomatic foreachBatch pattern (the Delta transaction id
``txnAppId``/``txnVersion`` = batchId commits with the data; the offsets are in the streaming
checkpoint).

Trigger: ``availableNow`` with ``maxOffsetsPerTrigger``: the job consumes the backlog that
exists at its start in bounded micro-batches, then stops -- a standing job with a
processing-time trigger would run the same micro-batches back to back, but never end. Two
decoders, both using the journal.wire codecs:

* ``collect`` (default): the micro-batch's records are collected to the driver, decoded and
  folded (last write per path wins, in offset order) in Python, and the MERGE source is built
  from the folded rows;
* ``udf``: a Python UDF decodes each record in the executors' Python workers; the rows are
  exploded and reduced to the last write per path with a window, then MERGEd.

Both produce the row layout of subscriber/rows.py (node rows only), so the two tables compare
cell for cell.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from journal.wire import messages as m
from journal.wire.package import Node, checksum, decode_package
from subscriber.rows import COLUMNS, SCHEMA, node_row

# Delta transaction id of the baseline's MERGE commits (one per streaming query).
TXN_CONFS = ("spark.databricks.delta.write.txnAppId", "spark.databricks.delta.write.txnVersion")
DELETE_OP = "delete"
UPSERT_OP = "upsert"
# SparkContexts this module was shipped to (for the UDF decoder's Python workers).
_SHIPPED_TO: set[int] = set()


class BaselineError(RuntimeError):
    """The baseline job met a record it cannot import (it only knows shallow roots)."""


@dataclass
class BaselineRun:
    seconds: float  # table creation + query start to termination
    stream_seconds: float  # query start to termination
    batches: int
    records: int
    foreach_seconds: dict[str, float] = field(default_factory=dict)  # collect/decode/merge sums
    progress_ms: dict[str, int] = field(default_factory=dict)  # summed durationMs of progress


def _decode_record(
    value: bytes, headers: dict[str, str], offset: int, now_ms: int
) -> list[tuple[Any, ...]]:
    """Rows (node row + op) of one package record, in package order."""
    message = m.decode(headers, value)
    if not isinstance(message, m.PackageMessage):
        return []
    data = bytes(message.pkg_binary)
    if message.checksum and checksum(data) != message.checksum:
        raise BaselineError(f"offset {offset}: checksum mismatch")
    package = decode_package(data)
    if any(r.deep for r in package.roots):
        raise BaselineError(f"offset {offset}: deep roots are not supported by the baseline")
    agent, pkg_id = message.pub_agent_name, message.pkg_id
    if message.req_type == m.ReqType.DELETE:
        # A row keyed by the deleted path: only matched, never written.
        return [
            (*node_row(Node(path=r.path), offset, pkg_id, agent, now_ms), DELETE_OP)
            for r in package.roots
        ]
    if message.req_type == m.ReqType.ADD:
        return [(*node_row(n, offset, pkg_id, agent, now_ms), UPSERT_OP) for n in package.nodes]
    return []


def _headers(raw: Any) -> dict[str, str]:
    return {h["key"]: bytes(h["value"]).decode() for h in raw or [] if h["value"] is not None}


def create_table(spark: Any, location: str) -> None:
    spark.createDataFrame([], SCHEMA).write.format("delta").save(location)


def _merge(spark: Any, location: str, source: Any, app_id: str, batch_id: int) -> None:
    from delta.tables import DeltaTable

    conf = spark.conf
    conf.set(TXN_CONFS[0], app_id)
    conf.set(TXN_CONFS[1], str(batch_id))
    try:
        (
            DeltaTable.forPath(spark, location)
            .alias("t")
            .merge(source.alias("s"), "t.path = s.path")
            .whenMatchedDelete(f"s.op = '{DELETE_OP}'")
            .whenMatchedUpdate(set={c: f"s.`{c}`" for c in COLUMNS})
            .whenNotMatchedInsert(f"s.op != '{DELETE_OP}'", values={c: f"s.`{c}`" for c in COLUMNS})
            .execute()
        )
    finally:
        for name in TXN_CONFS:
            conf.unset(name)


def collect_batch(
    location: str, app_id: str, timings: dict[str, float]
) -> Callable[[Any, int], None]:
    """foreachBatch body: collect to the driver, decode and fold there, one MERGE."""

    def process(batch: Any, batch_id: int) -> None:
        spark = batch.sparkSession
        started = time.perf_counter()
        records = batch.select("offset", "value", "headers").collect()
        collected = time.perf_counter()
        now_ms = int(time.time() * 1000)
        latest: dict[str, tuple[Any, ...]] = {}
        for r in sorted(records, key=lambda r: r["offset"]):
            for row in _decode_record(
                bytes(r["value"]), _headers(r["headers"]), r["offset"], now_ms
            ):
                latest[row[1]] = row
        decoded = time.perf_counter()
        if latest:
            source = spark.createDataFrame(list(latest.values()), SCHEMA + ", op STRING")
            _merge(spark, location, source, app_id, batch_id)
        merged = time.perf_counter()
        timings["collect"] = timings.get("collect", 0.0) + collected - started
        timings["decode"] = timings.get("decode", 0.0) + decoded - collected
        timings["merge"] = timings.get("merge", 0.0) + merged - decoded

    return process


def udf_batch(location: str, app_id: str, timings: dict[str, float]) -> Callable[[Any, int], None]:
    """foreachBatch body: decode in a Python UDF, last write per path by a window, one MERGE."""
    from pyspark.sql import SparkSession, Window
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, StructType, _parse_datatype_string

    # The UDF refers to this module by name: ship it to the Python workers (which already have
    # the scd packages, installed in the same environment).
    spark = SparkSession.getActiveSession()
    assert spark is not None, "start the SparkSession first"
    if id(spark.sparkContext) not in _SHIPPED_TO:
        spark.sparkContext.addPyFile(__file__)
        _SHIPPED_TO.add(id(spark.sparkContext))
    row_type = _parse_datatype_string(SCHEMA + ", op STRING")
    assert isinstance(row_type, StructType)

    def decode(value: bytes, headers: Any, offset: int) -> list[tuple[Any, ...]]:
        return _decode_record(bytes(value), _headers(headers), offset, int(time.time() * 1000))

    decode_udf = F.udf(decode, ArrayType(row_type))
    # Last write of a path: highest offset, then the last node of that package (its position).
    order = Window.partitionBy("r.path").orderBy(F.col("offset").desc(), F.col("pos").desc())

    def process(batch: Any, batch_id: int) -> None:
        spark = batch.sparkSession
        started = time.perf_counter()
        rows = (
            batch.select(
                "offset",
                F.posexplode(decode_udf("value", "headers", "offset")).alias("pos", "r"),
            )
            .withColumn("n", F.row_number().over(order))
            .where("n = 1")
            .select("r.*")
            .persist()
        )
        count = rows.count()
        decoded = time.perf_counter()
        if count:
            _merge(spark, location, rows, app_id, batch_id)
        rows.unpersist()
        merged = time.perf_counter()
        timings["decode"] = timings.get("decode", 0.0) + decoded - started
        timings["merge"] = timings.get("merge", 0.0) + merged - decoded

    return process


def run(
    spark: Any,
    *,
    bootstrap: str,
    topic: str,
    location: str,
    checkpoint: str,
    max_offsets_per_trigger: int,
    decoder: str,
) -> BaselineRun:
    """Create the table, run the query over the whole topic (availableNow), wait for it."""
    started = time.perf_counter()
    create_table(spark, location)
    app_id = f"bench-baseline-{uuid.uuid4().hex}"
    timings: dict[str, float] = {}
    body = (collect_batch if decoder == "collect" else udf_batch)(location, app_id, timings)
    stream_started = time.perf_counter()
    query = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
        .load()
        .writeStream.foreachBatch(body)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    ended = time.perf_counter()
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    summed: dict[str, int] = {}
    for p in progress:
        for key, value in p.get("durationMs", {}).items():
            summed[key] = summed.get(key, 0) + int(value)
    return BaselineRun(
        seconds=ended - started,
        stream_seconds=ended - stream_started,
        batches=len(progress),
        records=sum(int(p["numInputRows"]) for p in progress),
        foreach_seconds={k: round(v, 3) for k, v in timings.items()},
        progress_ms=summed,
    )
