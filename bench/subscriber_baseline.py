"""Baseline of the subscriber import benchmark: a plain Spark Structured Streaming job that reads
the package topic with Spark's Kafka source and MERGEs the nodes into a Delta table keyed by
path, exactly once through the idiomatic foreachBatch pattern (the Delta transaction id
``txnAppId``/``txnVersion`` = batchId commits with the data; the offsets are in the streaming
checkpoint).

Two triggers, one query: the throughput run uses ``availableNow`` with
``maxOffsetsPerTrigger`` (the job consumes the backlog that exists at its start in bounded
micro-batches, then stops); the latency run keeps the same query standing with
``processingTime="0 seconds"`` (a micro-batch starts as soon as the previous one has ended and
new records are there). Two decoders, both using the journal.wire codecs:

* ``collect`` (default): the micro-batch's records are collected to the driver, decoded and
  folded (last write per path wins, in offset order) in Python, and the MERGE source is built
  from the folded rows;
* ``udf``: a Python UDF decodes each record in the executors' Python workers; the rows are
  exploded and reduced to the last write per path with a window, then MERGEd.

Both produce the row layout of subscriber/store/rows.py (node rows only), so the two tables compare
cell for cell.
"""

from __future__ import annotations

import bisect
import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from journal.content.package import Node, checksum, decode_package
from journal.wire import messages as m
from subscriber.store.rows import COLUMNS, SCHEMA, node_row

# Delta transaction id of the baseline's MERGE commits (one per streaming query).
TXN_CONFS = ("spark.databricks.delta.write.txnAppId", "spark.databricks.delta.write.txnVersion")
DELETE_OP = "delete"
UPSERT_OP = "upsert"
DECODERS = ("collect", "udf")
# A throughput query that finishes no micro-batch for this long has failed: stop it instead of
# waiting forever.
STALL_TIMEOUT_S = 300.0
# How often a waiting caller looks at the query.
CHECK_EVERY_S = 5.0
# SparkContexts this module was shipped to (for the UDF decoder's Python workers).
_SHIPPED_TO: set[int] = set()


class BaselineError(RuntimeError):
    """The baseline job met a record it cannot import (it only knows shallow roots)."""


@dataclass
class BatchLog:
    """What the foreachBatch body did: phase times summed over the micro-batches, and per
    micro-batch (by batch id) when its MERGE commit ended (wall clock, ms) and how long the
    MERGE took."""

    phase_seconds: dict[str, float] = field(default_factory=dict)
    merged_ms: dict[int, float] = field(default_factory=dict)
    merge_seconds: dict[int, float] = field(default_factory=dict)

    def add(self, phase: str, seconds: float) -> None:
        self.phase_seconds[phase] = self.phase_seconds.get(phase, 0.0) + seconds


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


def _merge(
    spark: Any, location: str, source: Any, app_id: str, batch_id: int, batches: BatchLog
) -> None:
    from delta.tables import DeltaTable

    conf = spark.conf
    conf.set(TXN_CONFS[0], app_id)
    conf.set(TXN_CONFS[1], str(batch_id))
    try:
        started = time.perf_counter()
        (
            DeltaTable.forPath(spark, location)
            .alias("t")
            .merge(source.alias("s"), "t.path = s.path")
            .whenMatchedDelete(f"s.op = '{DELETE_OP}'")
            .whenMatchedUpdate(set={c: f"s.`{c}`" for c in COLUMNS})
            .whenNotMatchedInsert(f"s.op != '{DELETE_OP}'", values={c: f"s.`{c}`" for c in COLUMNS})
            .execute()
        )
        batches.merged_ms[batch_id] = time.time() * 1000
        batches.merge_seconds[batch_id] = time.perf_counter() - started
    finally:
        for name in TXN_CONFS:
            conf.unset(name)


def collect_batch(location: str, app_id: str, batches: BatchLog) -> Callable[[Any, int], None]:
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
            _merge(spark, location, source, app_id, batch_id, batches)
        merged = time.perf_counter()
        batches.add("collect", collected - started)
        batches.add("decode", decoded - collected)
        batches.add("merge", merged - decoded)

    return process


def udf_batch(location: str, app_id: str, batches: BatchLog) -> Callable[[Any, int], None]:
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
            _merge(spark, location, rows, app_id, batch_id, batches)
        rows.unpersist()
        merged = time.perf_counter()
        batches.add("decode", decoded - started)
        batches.add("merge", merged - decoded)

    return process


def start(
    spark: Any,
    *,
    bootstrap: str,
    topic: str,
    location: str,
    checkpoint: str,
    max_offsets_per_trigger: int,
    decoder: str,
    batches: BatchLog,
    trigger: dict[str, Any],
) -> Any:
    """Start the query on ``topic`` from its first record into the table at ``location``;
    ``trigger`` holds the keyword of ``DataStreamWriter.trigger``. Returns the query."""
    if decoder not in DECODERS:
        raise ValueError(f"decoder: one of {', '.join(DECODERS)}")
    app_id = f"bench-baseline-{uuid.uuid4().hex}"
    body = (collect_batch if decoder == "collect" else udf_batch)(location, app_id, batches)
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
        .load()
        .writeStream.foreachBatch(body)
        .option("checkpointLocation", checkpoint)
        .trigger(**trigger)
        .start()
    )


def _await_end(query: Any, batches: BatchLog) -> None:
    """Wait for an availableNow query to end; stop it if no micro-batch ends for too long."""
    done, progress_at = len(batches.merge_seconds), time.monotonic()
    while not query.awaitTermination(CHECK_EVERY_S):
        if len(batches.merge_seconds) != done:
            done, progress_at = len(batches.merge_seconds), time.monotonic()
        elif time.monotonic() - progress_at > STALL_TIMEOUT_S:
            query.stop()
            raise RuntimeError(f"baseline: no micro-batch ended in {STALL_TIMEOUT_S:.0f} s")


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
    batches = BatchLog()
    stream_started = time.perf_counter()
    query = start(
        spark,
        bootstrap=bootstrap,
        topic=topic,
        location=location,
        checkpoint=checkpoint,
        max_offsets_per_trigger=max_offsets_per_trigger,
        decoder=decoder,
        batches=batches,
        trigger={"availableNow": True},
    )
    _await_end(query, batches)
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
        foreach_seconds={k: round(v, 3) for k, v in batches.phase_seconds.items()},
        progress_ms=summed,
    )


@contextmanager
def standing(
    spark: Any,
    *,
    bootstrap: str,
    topic: str,
    location: str,
    checkpoint: str,
    max_offsets_per_trigger: int,
    decoder: str,
    batches: BatchLog,
) -> Iterator[Any]:
    """The same query kept running: a micro-batch as soon as the previous one ended and new
    records are there (``processingTime="0 seconds"``); stopped on exit."""
    create_table(spark, location)
    query = start(
        spark,
        bootstrap=bootstrap,
        topic=topic,
        location=location,
        checkpoint=checkpoint,
        max_offsets_per_trigger=max_offsets_per_trigger,
        decoder=decoder,
        batches=batches,
        trigger={"processingTime": "0 seconds"},
    )
    try:
        yield query
    finally:
        query.stop()


def _end_offset(progress: Any, topic: str) -> int | None:
    """Next offset of ``topic`` (one partition) after the micro-batch of a progress report."""
    raw = progress.sources[0].endOffset if progress.sources else None
    parsed = json.loads(raw) if raw else None
    if not parsed or topic not in parsed:
        return None
    (end,) = parsed[topic].values()
    return int(end)


def processed_end(query: Any, topic: str) -> int | None:
    """Next offset after what the query has processed (0 before any record), None before its
    first trigger ended."""
    if not query.isActive:
        query.awaitTermination()  # raises the query's failure
        raise RuntimeError("baseline: the standing query stopped")
    progress = query.lastProgress
    return None if progress is None else (_end_offset(progress, topic) or 0)


class BatchOfOffset:
    """Which micro-batch read an offset, from the query's progress reports (kept for every
    batch: the session sets ``spark.sql.streaming.numRecentProgressUpdates`` high enough)."""

    def __init__(self, query: Any, topic: str) -> None:
        ends: dict[int, int] = {}
        for progress in query.recentProgress:
            end = _end_offset(progress, topic)
            if progress.numInputRows > 0 and end is not None:
                ends[progress.batchId] = end
        self._ids = sorted(ends)
        self._ends = [ends[i] for i in self._ids]

    def __call__(self, offset: int) -> int | None:
        """Id of the first batch ending after ``offset``: batches read consecutive ranges."""
        index = bisect.bisect_right(self._ends, offset)
        return self._ids[index] if index < len(self._ids) else None
