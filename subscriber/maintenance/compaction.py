"""Compaction: the table's small files merged into files of up to a target size (bin-packing, as
Delta's OPTIMIZE does it), planned like a fold (subscriber.maintenance.rewrites): ``plan``
writes the new files from one version of the table and returns them with the files they
replace, and the store commits that (``rewrites.commit``, an OPTIMIZE with ``dataChange = false``).

Why not OPTIMIZE itself: it writes and commits in one call, so it must run in the store's
process (on S3 only one process writes the table's log), where it competes with the imports for
the CPU: on the million-node store, a compaction there made packages of a paced stream wait
over twice their median. A plan can be computed
by the fold worker, at the lowest CPU priority.
"""

from __future__ import annotations

from typing import Any

from runtime.clock import now_ms
from subscriber.maintenance.delta_table import small_file_bytes
from subscriber.maintenance.rewrites import (
    RewritePlan,
    check_since,
    file_name,
    scala_list,
    seq_list,
    transaction,
    without_data_change,
)


def plan(spark: Any, location: str, target_file_bytes: int, min_files: int = 2) -> RewritePlan:
    """The compaction of the table's latest version: its files below half
    ``target_file_bytes``, oldest first, in bins of up to ``target_file_bytes``, each bin
    written as one file (``dataChange = false``), uncommitted. Bins of one file are left as
    they are; no file is rewritten when none are, or when fewer than ``min_files`` are small.

    ``spark`` must be the thread's active session (delta_table.active_session)."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as func

    jvm = spark.sparkContext._jvm
    delta_log, txn, version = transaction(spark, location)
    snapshot = txn.snapshot()
    before = int(snapshot.numOfFiles())
    small = func.col("size") < small_file_bytes(target_file_bytes)
    files = sorted(
        snapshot.allFiles().where(small._jc).collectAsList(),
        key=lambda add: (add.modificationTime(), add.path()),
    )
    if len(files) < min_files:
        return RewritePlan(version, version, before, 0, 0, (), ())
    bins = [group for group in _bins(files, target_file_bytes) if len(group) > 1]
    written: list[Any] = []
    for group in bins:
        rows = delta_log.createDataFrame(
            snapshot, scala_list(jvm, group), False, jvm.scala.Option.empty()
        )
        written += seq_list(txn.writeFiles(DataFrame(rows, spark).coalesce(1)._jdf))
    removed = [add for group in bins for add in group]
    now = now_ms()
    actions = [without_data_change(add).json() for add in written]
    actions += [add.removeWithTimestamp(now, False).json() for add in removed]
    names = sorted(file_name(add.path()) for add in removed)
    checked = check_since(delta_log, version, set(names))
    return RewritePlan(version, checked, before, 0, len(written), tuple(names), tuple(actions))


def _bins(files: list[Any], target_file_bytes: int) -> list[list[Any]]:
    """``files`` (AddFile) in order, cut into runs of at most ``target_file_bytes`` (a file
    larger than that alone)."""
    bins: list[list[Any]] = [[]]
    size = 0
    for add in files:
        if bins[-1] and size + int(add.size()) > target_file_bytes:
            bins.append([])
            size = 0
        bins[-1].append(add)
        size += int(add.size())
    return bins
