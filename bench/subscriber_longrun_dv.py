"""Deletion vectors for the store's replacing commits (part of bench/subscriber_longrun.py).

1. The store itself: a DeltaStore table with ``delta.enableDeletionVectors = true`` takes a
   new page, then an edit of it (a replacing commit). On delta-spark 4.0.1 the edit fails:
   Delta's deletion-vector code names an internal column ``path`` too, and the store's table
   has one (delta-io/delta#2943, #5296).
2. What they would change: two tables with the store's schema except that ``path`` is named
   ``node_path``, loaded with the same pages and compacted to the store's target file size
   (a maintained store), one with deletion vectors. The same edits (one page per commit:
   its four node rows replaced with ``replaceWhere``, plus an offset row) then alternate
   between the two. Reported: p50/p95 commit time, data bytes written per edit (what stays on
   disk until VACUUM), files and bytes after, a full read of the nodes, and the OPTIMIZE that
   follows (it rewrites files carrying deletion vectors).
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import subscriber_workload as workload
from subscriber_latency import percentile

from journal.wire import messages as m
from journal.wire.package import ContentPackage, FilterRoot
from subscriber import delta_maintenance
from subscriber.changes import Unit, new_change_set
from subscriber.delta_store import DeltaStore
from subscriber.rows import KIND_OFFSET, bookkeeping_row, node_row, rows_frame, sql_string
from subscriber.settings import SubscriberSettings

DEFAULT_COMMITS = 200
PRELOAD_PAGES = 2000
PRELOAD_BATCH = 250
DV_PROPERTY = "delta.enableDeletionVectors"


def _page_rows(page: int, version: int, offset: int, rng: random.Random) -> list[Any]:
    now = int(time.time() * 1000)
    nodes = workload.page_nodes(page, version, rng, 4096)
    return [node_row(n, offset, f"dv-{offset}", workload.PUB_AGENT, now) for n in nodes]


def _data_bytes(location: str) -> int:
    """Bytes of data files (and deletion vectors) on disk, removed ones included."""
    return sum(
        p.stat().st_size
        for p in Path(location).iterdir()
        if p.is_file() and p.suffix in (".parquet", ".bin")
    )


def _frame(spark: Any, rows: list[Any]) -> Any:
    return rows_frame(spark, rows).withColumnRenamed("path", "node_path").coalesce(1)


def store_schema(spark: Any, work: Path) -> dict[str, Any]:
    """A replacing commit on the store's own table with deletion vectors on."""
    store = DeltaStore(spark, str(work / "dv-store"))
    store.open()
    spark.sql(
        f"ALTER TABLE {delta_maintenance.quoted(store.location)} "
        f"SET TBLPROPERTIES ('{DV_PROPERTY}' = 'true')"
    )
    rng = random.Random(1)
    for offset, version in enumerate((0, 1)):
        package = ContentPackage(
            package_id=f"dv-{offset}",
            req_type=m.ReqType.ADD,
            roots=[FilterRoot(path=p, deep=False) for p in workload.page_paths(0)],
            nodes=workload.page_nodes(0, version, rng, 4096),
        )
        unit = Unit(offset, workload.PUB_AGENT, package.package_id, m.ReqType.ADD, package)
        try:
            store.commit(new_change_set(store.paths, [unit]))
        except Exception as exc:
            return {"replacing_commit_works": False, "error": str(exc).splitlines()[0][:300]}
    return {"replacing_commit_works": True}


def evaluate(spark: Any, work: Path, commits: int, log: Callable[[str], None]) -> dict[str, Any]:
    target = SubscriberSettings().maintenance_target_file_bytes
    result: dict[str, Any] = {"store_schema": store_schema(spark, work)}
    log(f"deletion vectors: store schema {result['store_schema']}")
    tables = {name: str(work / f"dv-{name}") for name in ("without", "with")}
    for name, location in tables.items():
        rng = random.Random(7)
        for start in range(0, PRELOAD_PAGES, PRELOAD_BATCH):
            rows = [
                row
                for page in range(start, min(PRELOAD_PAGES, start + PRELOAD_BATCH))
                for row in _page_rows(page, 0, page, rng)
            ]
            writer = _frame(spark, rows).write.format("delta").mode("append")
            if start == 0:
                writer = writer.option(DV_PROPERTY, str(name == "with").lower())
            writer.save(location)
        delta_maintenance.compact(spark, location, target)
    seconds: dict[str, list[float]] = {name: [] for name in tables}
    data_before = {name: _data_bytes(location) for name, location in tables.items()}
    rng = random.Random(11)
    for i in range(commits):
        page = rng.randrange(PRELOAD_PAGES)
        offset = PRELOAD_PAGES + i
        order = list(tables.items()) if i % 2 == 0 else list(tables.items())[::-1]
        for name, location in order:
            rows = [
                *_page_rows(page, i + 1, offset, random.Random(i)),
                bookkeeping_row(KIND_OFFSET, offset, int(time.time() * 1000)),
            ]
            paths = ", ".join(sql_string(p) for p in workload.page_paths(page))
            started = time.perf_counter()
            _frame(spark, rows).write.format("delta").mode("overwrite").option(
                "replaceWhere", f"kind = 'node' AND node_path IN ({paths})"
            ).save(location)
            seconds[name].append(time.perf_counter() - started)
    for name, location in tables.items():
        stats = delta_maintenance.file_stats(spark, location)
        started = time.perf_counter()
        nodes = spark.read.format("delta").load(location).where("kind = 'node'").collect()
        read_s = time.perf_counter() - started
        started = time.perf_counter()
        delta_maintenance.compact(spark, location, target)
        optimize_s = time.perf_counter() - started
        result[name] = {
            "edit_commits": len(seconds[name]),
            "commit_p50_s": round(statistics.median(seconds[name]), 3),
            "commit_p95_s": round(percentile(seconds[name], 95), 3),
            "active_files": stats.files,
            "live_bytes": stats.bytes,
            "data_bytes_written_per_edit": round(
                (_data_bytes(location) - data_before[name]) / max(1, len(seconds[name]))
            ),
            "read_nodes_s": round(read_s, 3),
            "nodes": len(nodes),
            "optimize_after_s": round(optimize_s, 3),
        }
        log(f"deletion vectors {name}: {result[name]}")
    return result
