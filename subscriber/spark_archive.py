"""A class-data archive of the subscriber's Spark JVM (the JDK's AppCDS): the classes Spark and
Delta load while a store opens and imports, parsed and verified once and mapped read-only by
every later JVM instead of being loaded again.

Measured on a 2-core machine: a Spark session's start and a few Delta commits took 13.5-14.7 s
with the archive against 18.3-27.8 s without, and about 25 % less CPU. A subscriber, a CLI
command and a restarted or newly scaled agent all start that much sooner, and JVMs on one host
share the archive's pages.

``scd spark-archive PATH`` builds one: a JVM started with the subscriber's Spark settings runs
a small import on a scratch store and writes the classes it loaded when it exits. An archive is
valid only for the JDK and the Spark classpath (down to the jars folder's path, and the size
and time of each jar on the driver's own class path) that built it: the JDK silently ignores
any other. So the build writes the fingerprint of both beside the
archive (``PATH.fingerprint``), and a session given an archive whose fingerprint differs says so
and starts without it. ``archive_name(settings)`` is the name that changes with the
fingerprint.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from journal.content.package import ContentPackage, FilterRoot, Node
from journal.wire import messages as m
from subscriber.settings import SubscriberSettings
from subscriber.spark import (
    QUIET_CLASS_ARCHIVE,
    class_archive_fingerprint,
    class_archive_fingerprint_file,
    default_class_archive_name,
    driver_class_path,
    spark_session,
)
from subscriber.store.changes import ChangeSet, Unit
from subscriber.store.delta import DeltaStore

# The training import: enough packages for every kind of commit the store makes.
TRAINING_PACKAGES = 6
# The JVM writes the archive as it exits, after the session stopped (a few seconds).
EXIT_TIMEOUT_S = 300.0


def _build_settings(settings: SubscriberSettings, store_path: str) -> SubscriberSettings:
    """``settings`` as the archive's build runs them: a local driver (the archive holds the
    driver's classes, wherever tasks run) on the scratch store ``store_path``."""
    return settings.model_copy(
        update={"store_path": store_path, "spark_class_archive": None, "spark_master": "local[2]"}
    )


def archive_name(settings: SubscriberSettings) -> str:
    """The name of the archive that ``build`` makes for ``settings`` (it changes with the
    fingerprint of the build's class path)."""
    return default_class_archive_name(driver_class_path(_build_settings(settings, "")))


def build(settings: SubscriberSettings, archive: Path) -> float:
    """Write the archive for ``settings``' Spark jars to ``archive`` (replaced atomically, so
    JVMs starting meanwhile map the old one or the new one, never half of one); the seconds it
    took."""
    started = time.monotonic()
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(f".{archive.name}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="scd-spark-archive-") as scratch:
        training = _build_settings(settings, str(Path(scratch) / "store"))
        spark = spark_session(
            training,
            "scd-spark-archive",
            java_options=f"-XX:ArchiveClassesAtExit={partial} {QUIET_CLASS_ARCHIVE}",
        )
        try:
            _train(spark, training.store_path)
        finally:
            _stop_jvm(spark)
    if not partial.is_file():
        raise RuntimeError(f"the JVM wrote no class archive to {partial}")
    # The fingerprint first: a session that sees the new archive also sees what it is for.
    described = partial.with_suffix(".fingerprint")
    described.write_text(class_archive_fingerprint(driver_class_path(training)) + "\n")
    os.replace(described, class_archive_fingerprint_file(archive))
    os.replace(partial, archive)
    return time.monotonic() - started


def _train(spark: Any, location: str) -> None:
    """The store's life in small: claim, open, imports (adds, updates, deletes), bookkeeping,
    checkpoint, maintenance and the reads of the content commands."""
    store = DeltaStore(spark, location)
    store.claim(1, "spark-archive")
    store.open()
    for offset in range(TRAINING_PACKAGES):
        page = f"/content/site/p{offset % 4}"
        kind = m.ReqType.DELETE if offset % 5 == 4 else m.ReqType.ADD
        nodes = [Node(path=page)] + [Node(path=f"{page}/n{i}") for i in range(3)]
        package = ContentPackage(
            package_id=f"training-{offset}",
            req_type=kind,
            roots=[FilterRoot(path=page, deep=True)],
            nodes=nodes if kind == m.ReqType.ADD else [],
        )
        changes = ChangeSet()
        status = m.Status.IMPORTED if kind == m.ReqType.ADD else m.Status.REMOVED
        changes.add(
            Unit(offset, "spark-archive", package.package_id, kind, package, status, 0, offset + 1)
        )
        store.commit(changes)
    store.checkpoint()
    store.fold(100)
    store.compact(1 << 20)
    store.vacuum()
    store.nodes("/")
    store.node("/content/site/p0")
    store.history()
    DeltaStore(spark, location).open()


def _stop_jvm(spark: Any) -> None:
    """Stop the session and wait for its JVM to exit: PySpark's gateway JVM exits when its
    stdin closes, and writes the archive on the way."""
    gateway = spark.sparkContext._gateway
    spark.stop()
    process = getattr(gateway, "proc", None)
    gateway.shutdown()
    if process is None:
        raise RuntimeError("the Spark JVM was not started by this process: no archive to write")
    if process.stdin is not None:
        process.stdin.close()
    process.wait(timeout=EXIT_TIMEOUT_S)
