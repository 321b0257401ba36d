"""The Spark JVM's class-data archive (subscriber/spark_archive.py) as a user meets it: built by
``scd spark-archive`` (tests/conftest.py builds the run's archive that way), mapped by a
subscriber's JVM, and harmless when missing, corrupt or built elsewhere."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from subscriber.spark import class_archive_fingerprint_file
from tests import services

pytestmark = [pytest.mark.integration]

# The JDK's class-loading log names where each class came from; the archive's layer is "top".
FROM_ARCHIVE = "source: shared objects file (top)"


def content_maintain(tmp_path: Path, archive: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """``scd content maintain`` of a store that does not exist (the JVM starts, Delta looks for
    the table): the result and the JVMs' class-loading logs."""
    logs = tmp_path / f"classes-{len(list(tmp_path.iterdir()))}"
    logs.mkdir()
    tool_options = os.environ.get("JAVA_TOOL_OPTIONS", "")
    done = subprocess.run(
        [sys.executable, "-m", "scd", "content", "--store", str(tmp_path / "none"), "maintain"],
        env={
            **os.environ,
            "SCD_SUBSCRIBER_SPARK_JARS": ",".join(services.spark_jars()),
            "SCD_SUBSCRIBER_SPARK_CLASS_ARCHIVE": archive,
            "JAVA_TOOL_OPTIONS": f"{tool_options} -Xlog:class+load=info:file={logs}/%p.log",
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done, "".join(p.read_text(errors="replace") for p in logs.iterdir())


def test_the_driver_maps_the_archive_and_starts_without_one(tmp_path: Path) -> None:
    archive = services.spark_class_archive()
    assert archive is not None, "another process is still building the archive"
    used, loaded = content_maintain(tmp_path, str(archive))
    assert "no content store" in used.stderr, used.stderr[-2000:]
    from_archive = [line for line in loaded.splitlines() if FROM_ARCHIVE in line]
    assert len(from_archive) > 5000, f"{len(from_archive)} classes from the archive"
    assert any(" org.apache.spark.sql.delta." in line for line in from_archive)  # Delta's jar
    assert any(" org.apache.spark.SparkContext " in line for line in from_archive)

    without, loaded = content_maintain(tmp_path, "")
    assert "no content store" in without.stderr, without.stderr[-2000:]
    assert FROM_ARCHIVE not in loaded


@pytest.mark.parametrize("archive", ["missing", "corrupt", "built elsewhere"])
def test_a_missing_corrupt_or_foreign_archive_costs_only_speed(
    tmp_path: Path, archive: str
) -> None:
    path = tmp_path / "classes.jsa"
    if archive == "corrupt":
        path.write_bytes(os.urandom(1 << 16))
    if archive == "built elsewhere":  # a good archive of another JDK or Spark install
        built = services.spark_class_archive()
        assert built is not None, "another process is still building the archive"
        shutil.copyfile(built, path)
        class_archive_fingerprint_file(path).write_text("0123456789abcdef\n")
    done, loaded = content_maintain(tmp_path, str(path))
    assert "no content store" in done.stderr, done.stderr[-2000:]
    assert FROM_ARCHIVE not in loaded
    assert "[cds" not in done.stdout + done.stderr  # the JDK's complaints stay quiet
    if archive == "missing":
        assert f"Spark class archive {path} missing" in done.stderr
    if archive == "built elsewhere":
        assert "built for another JDK or Spark install" in done.stderr
