"""scd's local filesystem (subscriber/jvm, io.scd.hadoop): Hadoop's, without the shell command
it starts for each file it creates or renames, in the tests' real Spark JVM."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from subscriber.store.delta import DeltaStore
from tests import services
from tests.subscriber.packages import add, new_change_set, node

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not services.java_available(), reason="Spark needs Java (17+)"),
]


def _children_cpu_s(pid: int) -> float:
    """CPU seconds of the processes ``pid`` started and waited for (/proc: cutime + cstime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def test_the_session_uses_it_for_files_and_file_contexts(spark: Any) -> None:
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    uri = jvm.java.net.URI("file:///")
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(uri, conf)
    assert fs.getClass().getName() == "io.scd.hadoop.LocalFileSystem"
    context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(uri, conf)
    assert context.getDefaultFileSystem().getClass().getName() == "io.scd.hadoop.LocalFs"


def test_created_files_get_their_mode_and_renames_never_overwrite(
    spark: Any, tmp_path: Path
) -> None:
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    hadoop = jvm.org.apache.hadoop.fs
    fs = hadoop.FileSystem.get(jvm.java.net.URI("file:///"), conf)
    path = hadoop.Path(f"file://{tmp_path}/a.txt")
    fs.create(path, hadoop.permission.FsPermission(0o640), False, 4096, 1, 1 << 20, None).close()
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o640
    fs.setPermission(path, hadoop.permission.FsPermission(0o604))
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o604

    # Delta's log store commits a version by a rename that must not replace a file: another
    # writer's commit of the same version.
    context = hadoop.FileContext.getFileContext(jvm.java.net.URI("file:///"), conf)
    (tmp_path / "b.txt").write_text("theirs")
    (tmp_path / "c.txt").write_text("mine")
    no_options = spark.sparkContext._gateway.new_array(hadoop.Options.Rename, 0)
    with pytest.raises(Exception, match="FileAlreadyExistsException"):
        context.rename(
            hadoop.Path(f"file://{tmp_path}/c.txt"),
            hadoop.Path(f"file://{tmp_path}/b.txt"),
            no_options,
        )
    assert (tmp_path / "b.txt").read_text() == "theirs"
    context.rename(
        hadoop.Path(f"file://{tmp_path}/c.txt"), hadoop.Path(f"file://{tmp_path}/d.txt"), no_options
    )
    assert (tmp_path / "d.txt").read_text() == "mine"
    assert not (tmp_path / "c.txt").exists()


def test_a_link_keeps_its_link_status(spark: Any, tmp_path: Path) -> None:
    jvm = spark.sparkContext._jvm
    hadoop = jvm.org.apache.hadoop.fs
    fs = hadoop.FileSystem.get(
        jvm.java.net.URI("file:///"), spark.sparkContext._jsc.hadoopConfiguration()
    )
    (tmp_path / "target.txt").write_text("x")
    (tmp_path / "link.txt").symlink_to(tmp_path / "target.txt")
    # Hadoop finds links by path only (its readlink is given the path as written).
    link = fs.getFileLinkStatus(hadoop.Path(str(tmp_path / "link.txt")))
    assert link.isSymlink()
    assert link.getSymlink().toUri().getPath() == str(tmp_path / "target.txt")
    plain = fs.getFileLinkStatus(hadoop.Path(f"file://{tmp_path}/target.txt"))
    assert not plain.isSymlink()
    assert plain.getLen() == 1


def test_commits_to_a_local_store_start_no_process(spark: Any, tmp_path: Path) -> None:
    store = DeltaStore(spark, str(tmp_path / "store"))
    store.open()
    jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    before = _children_cpu_s(jvm_pid)
    for offset in range(20):
        page = f"/content/p{offset}"
        store.commit(new_change_set([add(offset, page, node(page, title=str(offset)))]))
    # Hadoop's own filesystem starts 22 processes per commit here (chmod, readlink), 0.04 CPU-s.
    assert _children_cpu_s(jvm_pid) - before < 0.1
    assert len(store.nodes("/content")) == 20
