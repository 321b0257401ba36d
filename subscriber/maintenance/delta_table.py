"""Maintenance operations on the subscriber's Delta table (what the scheduler runs, through
DeltaStore): file statistics, checkpoints, VACUUM and the table's retention (the fold
and the compaction: subscriber.maintenance.rewrites, subscriber.maintenance.compaction).

None of them changes content or offset. A checkpoint commits nothing; VACUUM only deletes files
no version within the retention reads, and commits nothing either; the retention is two table
properties. So they may run between any two imports without touching exactly-once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from subscriber.store.base import FileStats, StepOutcome

log = logging.getLogger(__name__)

LOG_RETENTION = "delta.logRetentionDuration"
FILE_RETENTION = "delta.deletedFileRetentionDuration"
# VACUUM lists the table's directory in a Spark job of this many tasks (10,000 by default,
# whatever the table's size): most of a VACUUM's time on a store of a few hundred files.
LISTING_PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"


@contextmanager
def active_session(spark: Any) -> Iterator[Any]:
    """``spark`` (a store's maintenance session) as the thread's active session for the block:
    Delta takes its settings from the active session and builds its DataFrames in it (a
    DeltaLog's session is the active one). The thread's previous one is restored after."""
    sessions = spark.sparkContext._jvm.org.apache.spark.sql.SparkSession
    previous = sessions.getActiveSession()
    sessions.setActiveSession(spark._jsparkSession)
    try:
        yield spark
    finally:
        if previous.isDefined():
            sessions.setActiveSession(previous.get())
        else:
            sessions.clearActiveSession()


def quoted(location: str) -> str:
    return "delta.`" + location.replace("`", "``") + "`"


def snapshot(spark: Any, location: str) -> Any:
    """The table's latest Delta snapshot (JVM object): no Spark job when the log is cached."""
    jvm = spark.sparkContext._jvm
    none = jvm.scala.Option.empty()
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, location)
    return delta_log.update(False, none, none)


def latest_version(spark: Any, location: str) -> int:
    """The table's latest version this process knows, without I/O: a commit of this process
    (any of its sessions) installs its own version."""
    jvm = spark.sparkContext._jvm
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, location)
    return int(delta_log.unsafeVolatileSnapshot().version())


def file_stats(spark: Any, location: str) -> FileStats:
    """From the latest version's checksum file (each commit writes one): no Spark job. The
    snapshot's own counts rebuild the table's state, 3 Spark jobs and 0.8-1.6 s on the
    million-node store after each commit, on the imports' cores (the maintenance thread looks
    at them after a commit); that is the fallback for a version without a checksum."""
    current = snapshot(spark, location)
    checksum = current.checksumOpt()
    if checksum.isDefined():
        return FileStats(int(checksum.get().numFiles()), int(checksum.get().tableSizeBytes()))
    return FileStats(int(current.numOfFiles()), int(current.sizeInBytes()))


def small_file_bytes(target_file_bytes: int) -> int:
    """Files below this size are compacted (subscriber.maintenance.compaction), into files of up to
    ``target_file_bytes``. Files from half the target size up are left alone, so a run rewrites
    at most half a target of earlier output (with OPTIMIZE's defaults, 1 GiB, every small file
    would join one ever-growing file, rewritten by every run and by every fold touching one of
    its rows)."""
    return max(1, int(target_file_bytes) // 2)


def vacuum(spark: Any, location: str) -> StepOutcome:
    """Delete the files no version within the table's retention (``set_retention``) reads:
    those Delta's VACUUM finds (its DRY RUN: it lists the table's directory, so it also finds
    files of commits that never landed), deleted here. Delta's VACUUM itself would commit its
    START and END: only the table's one writer may commit, and this runs in the fold worker
    too (subscriber.maintenance.fold_worker), out of the imports' JVM, where a VACUUM of the
    million-node store made the packages beside it wait over twice their median. No RETAIN
    clause: Delta rounds one to whole hours (and refuses less than 7 days unless a session
    check is off), while the table property is honoured to the second, so a retention of
    minutes works as set."""
    files = file_stats(spark, location).files
    spark.conf.set(LISTING_PARALLELISM, spark.conf.get("spark.sql.shuffle.partitions"))
    found = [row["path"] for row in spark.sql(f"VACUUM {quoted(location)} DRY RUN").collect()]
    jvm = spark.sparkContext._jvm
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    deleted, reclaimed = 0, 0
    for name in found:
        path = jvm.org.apache.hadoop.fs.Path(name)
        filesystem = path.getFileSystem(hadoop)
        try:
            size = int(filesystem.getFileStatus(path).getLen())
        except Exception as exc:  # Py4JJavaError: the Java exception's name is in its text
            if "java.io.FileNotFoundException" not in str(exc):
                raise
            continue  # gone meanwhile (another VACUUM): nothing to delete
        if filesystem.delete(path, False):
            deleted, reclaimed = deleted + 1, reclaimed + size
    return StepOutcome(files, files, deleted, reclaimed)


def retention_interval(retention_s: float) -> str:
    return f"interval {max(0, round(retention_s))} seconds"


def set_retention(
    spark: Any,
    location: str,
    retention_s: float,
    log_retention_s: float,
    commit_lock: AbstractContextManager[Any],
) -> bool:
    """Make the table keep removed files ``retention_s`` (what VACUUM and the tombstones in
    checkpoints go by) and its log ``log_retention_s``; True when that changed them. Read from
    the snapshot's metadata (no Spark job: DESCRIBE DETAIL took 1.7 s on the million-node
    store); changed, rarely, under ``commit_lock`` (the store's: a change of the table's
    properties fails an import that read the table before it)."""
    configuration = snapshot(spark, location).metadata().configuration()
    wanted = {
        FILE_RETENTION: retention_interval(retention_s),
        LOG_RETENTION: retention_interval(log_retention_s),
    }
    if all(_option(configuration.get(key)) == value for key, value in wanted.items()):
        return False
    settings = ", ".join(f"'{key}' = '{value}'" for key, value in wanted.items())
    with commit_lock:
        spark.sql(f"ALTER TABLE {quoted(location)} SET TBLPROPERTIES ({settings})")
    log.info("content store %s: %s", location, settings)
    return True


def _option(value: Any) -> str | None:
    """A Scala Option of a string (JVM gateway) as a Python value."""
    return str(value.get()) if value.isDefined() else None


def checkpoint(spark: Any, location: str) -> None:
    """Write a Delta checkpoint of the table's latest version (readers, and commits that
    replace rows, then replay the log from there), then delete the log entries past the log
    retention (``clean_log``). Any process may: a checkpoint is the state of a version that
    is already committed, and two of one version hold the same. Delta has no public API for it;
    this calls delta-spark 4.0's DeltaLog through the JVM gateway. The latest version, not the
    one this JVM last saw (a fold worker's is behind the store's commits)."""
    jvm = spark.sparkContext._jvm
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, location)
    delta_log.checkpoint(snapshot(spark, location), jvm.scala.Option.empty())
    clean_log(spark, location)


def clean_log(spark: Any, location: str) -> None:
    """Delete log entries older than the table's log retention, rounded down to the minute.
    Delta's own cleanup (when it writes a checkpoint) rounds down to the day: it keeps up to a
    day of commits more, which for a subscriber committing every package is most of the log.
    There is no public API for this: it calls delta-spark 4.0's DeltaLog through the JVM."""
    jvm = spark.sparkContext._jvm
    delta = jvm.org.apache.spark.sql.delta
    try:
        delta_log = delta.DeltaLog.forTable(spark._jsparkSession, location)
        minute = delta.TruncationGranularity.MINUTE()
        delta_log.cleanUpExpiredLogs(snapshot(spark, location), jvm.scala.Option.empty(), minute)
    except Exception:  # another Delta version: its own daily cleanup still runs
        log.warning("log cleanup of %s failed", location, exc_info=True)
