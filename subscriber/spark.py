"""The subscriber's SparkSession: Delta Lake enabled, s3a configured for stores on S3."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from subscriber.errors import StorePathError
from subscriber.settings import SubscriberSettings
from subscriber.writer.location import S3Store, store_location

log = logging.getLogger(__name__)

# Maven coordinates Spark resolves (through Ivy, from ~/.m2 or Maven Central) when no local
# jars are configured. Versions match pyspark 4.0.x (Scala 2.13) and delta-spark 4.0.1.
DELTA_PACKAGE = "io.delta:delta-spark_2.13:4.0.1"
S3A_PACKAGE = "org.apache.hadoop:hadoop-aws:3.4.1"
S3A_FILE_SYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"
# Spark evaluates plans and expressions without generating code (settings.spark_codegen):
# ``factoryMode`` is the switch of expression code generation (Spark names it internal).
INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
# Spark's own INFO/WARN chatter (planner hints, native-library notices) is noise for an
# agent or a CLI; errors still reach the log.
SPARK_LOG_LEVEL = "ERROR"
# The s3a credentials (s3a_credentials): Hadoop settings of the running JVM, never Spark
# settings on its command line.
ACCESS_KEY = "fs.s3a.access.key"
SECRET_KEY = "fs.s3a.secret.key"
# Store maintenance runs beside imports on the same driver (subscriber.maintenance.scheduler).
# With Spark's default FIFO scheduling an import's job waited for every task of a fold's stage
# queued before it (tens of seconds on a million-node store); with these pools its tasks take
# the next free core.
SCHEDULER_POOLS = Path(__file__).with_name("spark_pools.xml")
# A thread's jobs go to the pool this local property names (none: "default", the imports').
POOL_PROPERTY = "spark.scheduler.pool"
MAINTENANCE_POOL = "maintenance"
# An agent that is not ready yet: a new instance, out of service until it has caught up, gets
# the next free core before the imports of the agents already serving (queued behind them, a
# joiner in a hundred-agent daemon waits for all their imports before each of its own).
STARTING_POOL = "catch_up"
# The JDK logs each class it cannot archive (hundreds: generated, signed-jar and pre-Java-6
# classes) and a warning when an archive does not match: neither is the user's concern.
QUIET_CLASS_ARCHIVE = "-Xlog:cds=off -Xlog:cds+dynamic=off"
# scd's own jar (subscriber/jvm): Hadoop's local filesystem without the shell commands it starts
# for every file without its native library (22 processes per small commit, a third of its
# time). Used when the jar is among the session's jars and tasks run in the driver (a local
# master): the filesystem is looked up by class name before ``spark.jars`` are loaded, so the jar
# goes on the driver's own classpath, which a cluster's executors do not share.
LOCAL_FS_JAR_PREFIX = "scd-hadoop-localfs-"
LOCAL_FS = {
    "spark.hadoop.fs.file.impl": "io.scd.hadoop.LocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "io.scd.hadoop.LocalFs",
}
# A fingerprint is a few hundred bytes; reading a file beside the archive stays bounded.
FINGERPRINT_MAX_BYTES = 1 << 16


def class_archive_options(archive: Path) -> str:
    """The driver JVM's options that map the class-data archive ``archive``
    (subscriber/spark_archive.py); ``-Xshare:auto``: without it when it does not match this JDK
    and Spark's classpath."""
    return f"-XX:SharedArchiveFile={archive} -Xshare:auto {QUIET_CLASS_ARCHIVE}"


def class_archive_fingerprint(class_path: Sequence[str] = ()) -> str:
    """What an archive is valid for, as canonical JSON: the JVM PySpark starts (its real path
    and build), the Spark jars folder on its classpath (``spark_jars``: path and version) and
    the jars on the driver's own class path (``driver_class_path``: path, size and time, which
    the JDK checks: an archive of a rebuilt jar is not mapped)."""
    import pyspark

    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home) / "bin" / "java" if java_home else Path(shutil.which("java") or "java")
    java = java.resolve()
    spark_home = os.environ.get("SPARK_HOME") or str(Path(pyspark.__file__).parent)
    described = {
        "java": str(java),
        "java_build": java.stat().st_mtime_ns if java.exists() else None,
        "spark_jars": str((Path(spark_home) / "jars").resolve()),
        "pyspark": pyspark.__version__,
        "class_path": [_jar_identity(jar) for jar in class_path],
    }
    return json.dumps(described, sort_keys=True)


def _jar_identity(jar: str) -> list[object]:
    try:
        stat = Path(jar).stat()
    except OSError:
        return [jar, None, None]
    return [str(Path(jar).resolve()), stat.st_size, stat.st_mtime_ns]


def driver_class_path(settings: SubscriberSettings) -> list[str]:
    """The jars ``spark_config`` puts on the driver JVM's own class path: all of them when they
    are installed where the executors run too, else scd's local filesystem jar with a local
    master (LOCAL_FS_JAR_PREFIX), else none (``spark.jars`` load later, in another loader)."""
    if settings.spark_jars_installed:
        return list(settings.spark_jars)
    local_fs = _local_fs_jar(settings)
    return [local_fs] if local_fs is not None else []


def _local_fs_jar(settings: SubscriberSettings) -> str | None:
    """scd's local filesystem jar when it is among the session's jars and tasks run in the
    driver (a local master): the filesystem is then used (LOCAL_FS_JAR_PREFIX)."""
    if not settings.spark_master.startswith("local"):
        return None
    jars = (j for j in settings.spark_jars if Path(j).name.startswith(LOCAL_FS_JAR_PREFIX))
    return next(jars, None)


def class_archive_fingerprint_file(archive: Path) -> Path:
    return archive.with_name(f"{archive.name}.fingerprint")


def default_class_archive_name(class_path: Sequence[str] = ()) -> str:
    """An archive file name for this JDK and Spark install and the driver's ``class_path``: one
    built for another never has it."""
    import pyspark

    digest = hashlib.sha256(class_archive_fingerprint(class_path).encode()).hexdigest()[:16]
    return f"classes-{pyspark.__version__}-{digest}.jsa"


def read_class_archive_fingerprint(archive: Path) -> str | None:
    """The fingerprint written beside ``archive`` by its build (None: there is none); OSError or
    ValueError when it cannot be read as one."""
    try:
        with class_archive_fingerprint_file(archive).open("rb") as described:
            return described.read(FINGERPRINT_MAX_BYTES).decode("utf-8").strip()
    except FileNotFoundError:
        return None


def class_archive_matches(archive: Path, class_path: Sequence[str] = ()) -> bool:
    """False when ``archive`` was built for another JDK or Spark install; True when it was built
    for this one or its fingerprint is unknown (the JDK's own check then decides)."""
    try:
        built_for = read_class_archive_fingerprint(archive)
    except (OSError, ValueError):
        return False  # unreadable: as good as another install's (the JVM would refuse it too)
    return built_for is None or built_for == class_archive_fingerprint(class_path)


def _class_archive_java_options(archive: Path, class_path: Sequence[str]) -> str | None:
    if not archive.is_file():
        log.warning("Spark class archive %s missing: starting without it", archive)
        return None
    if not class_archive_matches(archive, class_path):
        log.warning(
            "Spark class archive %s was built for another JDK or Spark install: starting "
            "without it (rebuild it with scd spark-archive)",
            archive,
        )
        return None
    return class_archive_options(archive)


def spark_config(
    settings: SubscriberSettings,
    stores: Sequence[str] | None = None,
    *,
    java_options: str | None = None,
) -> dict[str, str]:
    """``stores``: the store paths the session serves (a daemon's agents; None: the one of
    ``settings``), for s3a's jars and configuration. ``java_options``: the driver JVM's, instead
    of those of the settings' class archive."""
    config = {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.driver.memory": settings.spark_driver_memory,
        # Imports are small jobs: Spark's default of 200 shuffle partitions would make every
        # MERGE schedule hundreds of empty tasks.
        "spark.sql.shuffle.partitions": str(settings.spark_shuffle_partitions),
        "spark.databricks.delta.snapshotPartitions": str(settings.spark_shuffle_partitions),
        "spark.ui.enabled": "false",
        # Stage progress bars would interleave with the agent's logs and the CLI's output.
        "spark.ui.showConsoleProgress": "false",
        "spark.scheduler.mode": "FAIR",
        "spark.scheduler.allocation.file": str(SCHEDULER_POOLS),
    }
    if not settings.spark_codegen:
        config.update(INTERPRETED)
    archive = settings.spark_class_archive
    if java_options is None and archive is not None:
        java_options = _class_archive_java_options(archive, driver_class_path(settings))
    if java_options:
        config["spark.driver.extraJavaOptions"] = java_options
    paths = [settings.store_path] if stores is None else stores
    on_s3 = _s3_schemes(paths)
    if settings.spark_jars:
        class_path = ":".join(driver_class_path(settings))
        if settings.spark_jars_installed:
            config["spark.executor.extraClassPath"] = class_path
        else:
            config["spark.jars"] = ",".join(settings.spark_jars)
        if class_path:
            config["spark.driver.extraClassPath"] = class_path
        if _local_fs_jar(settings) is not None:
            config.update(LOCAL_FS)
    else:
        config["spark.jars.packages"] = ",".join([DELTA_PACKAGE, *([S3A_PACKAGE] if on_s3 else [])])
    if on_s3:
        config.update(_s3a_config(settings, on_s3))
    return config


def _s3_schemes(paths: Sequence[str]) -> set[str]:
    """The S3 schemes (s3a, s3) of the stores at ``paths``; a malformed path is refused where
    its store opens (subscriber.writer.lease.lease_place), not here."""
    schemes = set()
    for path in paths:
        try:
            location = store_location(path)
        except StorePathError:
            continue
        if isinstance(location, S3Store):
            schemes.add(location.scheme)
    return schemes


def _s3a_config(settings: SubscriberSettings, schemes: set[str]) -> dict[str, str]:
    """Hadoop's S3A file system for stores on ``schemes``: s3:// is served by it too (plain
    Hadoop has no file system for s3://), with the blob store's endpoint, or AWS's with none."""
    blobs = settings.blobstore
    if blobs is None or blobs.backend != "s3":
        raise ValueError(
            "store_path is on S3 but no S3 blob store is configured to take the credentials "
            "(and endpoint) from (SCD_BLOB_*)"
        )
    config = {"spark.hadoop.fs.s3a.endpoint.region": blobs.region}
    if "s3" in schemes:
        config["spark.hadoop.fs.s3.impl"] = S3A_FILE_SYSTEM
    if blobs.endpoint_url is not None:  # an S3 server of one's own: path-style, as boto's
        config.update(
            {
                "spark.hadoop.fs.s3a.endpoint": blobs.endpoint_url,
                "spark.hadoop.fs.s3a.path.style.access": "true",
                "spark.hadoop.fs.s3a.connection.ssl.enabled": str(
                    blobs.endpoint_url.startswith("https")
                ).lower(),
            }
        )
    return config


def s3a_credentials(settings: SubscriberSettings) -> dict[str, str]:
    """The S3 credentials of the stores on s3a://, as Hadoop settings (none without an S3
    blob store). Kept out of ``spark_config``: pyspark hands Spark settings to spark-submit on
    its command line, which every local user can read (ps, /proc/<pid>/cmdline);
    ``spark_session`` sets these in the running JVM instead."""
    blobs = settings.blobstore
    if blobs is None or blobs.backend != "s3":
        return {}
    return {
        ACCESS_KEY: blobs.access_key or "",
        SECRET_KEY: blobs.secret_key.get_secret_value() if blobs.secret_key else "",
    }


def set_hadoop(spark: Any, values: Mapping[str, str]) -> None:
    """Set ``values`` in the Hadoop configuration of ``spark``'s context: every session's jobs
    copy it (their tasks get it with the job, on a cluster too)."""
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in values.items():
        hadoop.set(key, value)


def hadoop_credentials(spark: Any) -> dict[str, str]:
    """The S3 credentials set in ``spark``'s context (``set_hadoop``), for another process's
    session of the same stores (subscriber.maintenance.fold_worker)."""
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    values = {key: hadoop.get(key) for key in (ACCESS_KEY, SECRET_KEY)}
    return {key: str(value) for key, value in values.items() if value is not None}


def spark_session(
    settings: SubscriberSettings,
    app_name: str,
    *,
    stores: Sequence[str] | None = None,
    java_options: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> Any:
    """``extra``: Spark settings beside (or over) the subscriber's, such as binding the driver
    to the loopback interface (tests, benchmarks)."""
    from pyspark.sql import SparkSession

    config = {**spark_config(settings, stores, java_options=java_options), **(extra or {})}
    builder = SparkSession.builder.master(settings.spark_master).appName(app_name)
    for key, value in config.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(SPARK_LOG_LEVEL)
    set_hadoop(spark, s3a_credentials(settings))
    return spark
