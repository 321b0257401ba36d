"""Store maintenance on a real Delta table: compaction, VACUUM and log retention change no
content and no offset, and the purge never rewrites what an earlier purge wrote; a fold beside
imports, computed in the store's session or by the fold worker (a process of its own, at the
lowest CPU priority), lands without failing an import."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from subscriber.maintenance import compaction, delta_table
from subscriber.maintenance.fold_worker import FoldWorker
from subscriber.maintenance.scheduler import Maintenance, MaintenancePolicy
from subscriber.spark import ACCESS_KEY, SECRET_KEY
from subscriber.store.delta import DeltaStore
from subscriber.store.rows import StoredNode
from tests import services
from tests.services import S3Service
from tests.subscriber.harness import committed_offsets
from tests.subscriber.packages import add, delete, new_change_set, node

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def import_one_at_a_time(store: DeltaStore, first: int, count: int) -> None:
    """``count`` packages from offset ``first``, one commit each: new pages, and every third
    one an edit of an earlier page (a new version and a scope) or, every seventh, a delete."""
    for offset in range(first, first + count):
        if offset % 7 == 6:
            unit = delete(offset, f"/s/p{offset - 5}", deep=True)
        elif offset % 3 == 2:
            unit = add(offset, f"/s/p{offset - 2}", node(f"/s/p{offset - 2}", v=f"edit{offset}"))
        else:
            unit = add(offset, f"/s/p{offset}", node(f"/s/p{offset}", v="new"), deep=True)
        store.commit(new_change_set([unit]))


def content(spark: Any, location: str) -> tuple[int | None, dict[str, StoredNode]]:
    """The offset and every node, read back by a store opened afresh."""
    store = DeltaStore(spark, location)
    state = store.open()
    return state.offset, {n.path: n for n in store.nodes("/")}


def data_files_on_disk(location: str) -> set[str]:
    return {p.name for p in Path(location).glob("*.parquet")}


def spark_jobs(spark: Any, call: Callable[[], object]) -> int:
    """The Spark jobs ``call`` ran in this thread."""
    context = spark.sparkContext
    group = f"scd-test-{threading.get_ident()}-{time.monotonic_ns()}"
    context.setJobGroup(group, "counted")
    try:
        call()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    return len(context.statusTracker().getJobIdsForGroup(group))


def active_files(spark: Any, location: str) -> set[str]:
    return {Path(f).name for f in spark.read.format("delta").load(location).inputFiles()}


def commit_actions(location: str, operation: str) -> list[dict[str, Any]]:
    """The actions of the (last) commit of ``operation`` in the table's log."""
    found: list[dict[str, Any]] = []
    for path in sorted(Path(location, "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in path.read_text().splitlines()]
        if any(a.get("commitInfo", {}).get("operation") == operation for a in actions):
            found = actions
    return found


def test_maintenance_changes_no_content_no_offset_and_keeps_exactly_once(
    spark: Any, tmp_path: Path
) -> None:
    location = str(tmp_path / "store")
    store = DeltaStore(spark, location)
    store.open()
    import_one_at_a_time(store, 0, 12)
    # The maintenance thread looks at the file count right after an import's commit: from the
    # version's checksum file, without a Spark job on the imports' cores (the snapshot's own
    # count rebuilds the table's state: 3 jobs).
    assert spark_jobs(spark, store.file_stats) == 0
    offset, nodes = content(spark, location)
    files_before = store.file_stats().files
    assert files_before >= 12
    # Fewer small files than asked for: the compaction commits nothing.
    versions = len(store.history())
    assert store.compact(1 << 20, min_files=files_before + 1) is None
    assert len(store.history()) == versions

    # A zero retention: nothing else writes the table while this runs.
    policy = MaintenancePolicy(retention_s=0.0, log_retention_s=3600.0, target_file_bytes=1 << 20)
    maintenance = Maintenance("test", store, policy)
    reports = {r.step: r for r in maintenance.run_all()}
    assert list(reports) == ["purge", "fold", "compact", "retention", "checkpoint", "vacuum"]
    # Before each VACUUM: the retention as set, read from the snapshot without a Spark job.
    assert spark_jobs(spark, lambda: store.set_retention(0.0, 3600.0)) == 0
    assert store.state is not None
    assert store.state.scopes == 0
    node_rows = spark.read.format("delta").load(location).where("kind = 'node'").count()
    assert node_rows == len(nodes)  # edited and deleted versions folded away
    assert reports["compact"].files_after is not None
    assert reports["compact"].files_after <= 2 < files_before
    assert store.file_stats().files == reports["compact"].files_after
    optimize = commit_actions(location, "OPTIMIZE")
    assert [a["add"]["dataChange"] for a in optimize if "add" in a] == [False]
    assert all(not a["remove"]["dataChange"] for a in optimize if "remove" in a)
    assert reports["vacuum"].files_deleted > files_before - 2
    assert reports["vacuum"].bytes_reclaimed > 0
    assert data_files_on_disk(location) == active_files(spark, location)
    assert committed_offsets(store) == list(range(12))  # each package once, in one commit

    # Log entries older than the log retention go at the next checkpoint.
    log_dir = Path(location, "_delta_log")
    old = time.time() - 2 * 24 * 3600
    for entry in log_dir.iterdir():
        if entry.is_file():
            os.utime(entry, (old, old))
    first_json = min(log_dir.glob("*.json"))
    store.checkpoint()
    assert not first_json.exists()

    assert content(spark, location) == (offset, nodes)
    offsets = spark.read.format("delta").load(location).where("kind = 'offset'").collect()
    assert [r["offset"] for r in offsets] == [11]

    import_one_at_a_time(store, 12, 3)  # imports go on after maintenance
    assert content(spark, location)[0] == 14
    store.compact(policy.target_file_bytes)
    # VACUUM goes by the table's retention, to the second: files removed just now stay for a
    # retention of 20 minutes (a RETAIN clause would round it to 0 hours and delete them).
    assert store.set_retention(1200.0, 3600.0)
    assert store.vacuum().files_deleted == 0
    store.set_retention(0.0, 3600.0)
    assert store.vacuum().files_deleted > 0
    assert data_files_on_disk(location) == active_files(spark, location)


def test_a_purge_never_rewrites_what_an_earlier_purge_wrote(spark: Any, tmp_path: Path) -> None:
    """The current offset row is written alone: the files a purge rewrites hold no offset
    row, so the next purge leaves them as they are."""
    location = str(tmp_path / "store")
    store = DeltaStore(spark, location)
    store.open()
    import_one_at_a_time(store, 0, 5)
    store.forget_statuses(-1)
    rows = (
        spark.read.format("delta")
        .load(location)
        .selectExpr("kind", "offset", "_metadata.file_name AS file")
        .collect()
    )
    offset_files = {r["file"] for r in rows if r["kind"] == "offset"}
    assert [r["offset"] for r in rows if r["kind"] == "offset"] == [4]
    assert {r["kind"] for r in rows if r["file"] in offset_files} == {"offset"}
    purged = active_files(spark, location) - offset_files

    for offset in range(5, 8):  # new pages only: no commit rewrites an earlier file
        unit = add(offset, f"/n/p{offset}", node(f"/n/p{offset}"))
        store.commit(new_change_set([unit]))
    store.forget_statuses(-1)
    assert purged <= active_files(spark, location)
    assert DeltaStore(spark, location).open().offset == 7


def test_on_delta_a_fold_waits_until_the_table_s_bytes_grew_by_the_fold_growth(
    spark: Any, tmp_path: Path
) -> None:
    """The growth trigger reads the real table's size: after a fold, the next waits until
    appends made the table ``fold_growth`` larger than the fold left it."""
    store = DeltaStore(spark, str(tmp_path / "store"))
    store.open()
    import_one_at_a_time(store, 0, 6)
    policy = MaintenancePolicy(enabled=False, fold_min_scopes=1, fold_growth=2.0)
    maintenance = Maintenance("test", store, policy)
    assert maintenance.step() is None  # the first fold of the process: on the scope count alone
    maintenance.wait(300)
    assert [r.step for r in maintenance.reports] == ["fold"]
    folded = store.file_stats().bytes
    assert store.state is not None
    due_at = None
    for offset in range(6, 40):
        import_one_at_a_time(store, offset, 1)
        maintenance.commits_since_purge += 1  # as the import loop counts them
        grown = store.file_stats().bytes >= folded * 3
        runs = maintenance.runs
        maintenance.step()  # no purge is due (100 commits), a checkpoint may be
        maintenance.wait(300)
        steps = [r.step for r in list(maintenance.reports)[runs:]]
        assert ("fold" in steps) == grown, offset
        if grown:
            due_at = offset
            break
    assert due_at is not None
    assert due_at > 7  # appends without a fold came first
    assert store.state.scopes == 0


# Between two imports beside a fold, as packages arrive: back to back they kept both cores
# busy, and the worker, at the lowest priority, got the CPU only when they paused.
IMPORT_PAUSE_S = 0.3


# Stands for the S3 secret key in the session the fold worker copies: it must reach the
# worker's JVM without being on a command line.
SECRET_MARKER = "fold-worker-secret-4f1d"


@pytest.fixture(scope="module")
def fold_worker(spark: Any) -> Iterator[FoldWorker]:
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    saved = hadoop.get(SECRET_KEY)  # another test's S3 server, when one ran before
    hadoop.set(SECRET_KEY, SECRET_MARKER)
    try:
        worker = FoldWorker.of(spark)
    finally:
        if saved is None:
            hadoop.unset(SECRET_KEY)
        else:
            hadoop.set(SECRET_KEY, saved)
    with worker:
        yield worker


@pytest.mark.parametrize("computed_by", ["store", "worker"])
def test_a_fold_beside_imports_lands_and_never_fails_one(
    spark: Any,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    computed_by: str,
) -> None:
    """A fold runs in a thread while packages are imported one commit at a time: imports
    committed after the version it read neither fail nor make it fail, and the store holds the
    same tree as one that was never folded. The fold worker computes it at nice 19, its Spark
    JVM too, and writes the store's checkpoints."""
    location, unfolded = str(tmp_path / "store"), str(tmp_path / "unfolded")
    worker = request.getfixturevalue("fold_worker") if computed_by == "worker" else None
    store, reference = DeltaStore(spark, location, worker), DeltaStore(spark, unfolded)
    for s in (store, reference):
        s.open()
        import_one_at_a_time(s, 0, 24)
    assert store.state is not None
    scopes = store.state.scopes
    errors: list[BaseException] = []

    def fold() -> None:
        try:
            store.fold(1000)
        except BaseException as exc:  # handed to the test thread
            errors.append(exc)

    folding = threading.Thread(target=fold)
    folding.start()
    offset = 24
    while folding.is_alive() or offset < 27:
        import_one_at_a_time(store, offset, 1)
        offset += 1
        time.sleep(IMPORT_PAUSE_S)
    folding.join()
    assert errors == []
    if worker is not None:
        assert worker.pid is not None
        processes = [worker.pid, *_children(worker.pid)]
        assert [_nice(pid) for pid in processes] == [19, 19]
        for pid in processes:
            assert SECRET_MARKER.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()

        monkeypatch.setattr(delta_table, "checkpoint", _checkpoint_in_this_process)
        store.checkpoint()
        log_dir = Path(location, "_delta_log")
        latest = max(int(p.stem) for p in log_dir.glob("*.json"))
        assert json.loads((log_dir / "_last_checkpoint").read_text())["version"] == latest
        assert (log_dir / f"{latest:020d}.checkpoint.parquet").is_file()
        _compacted_by_the_worker(store, monkeypatch)
        optimize = commit_actions(location, "OPTIMIZE")
        assert optimize, "no compaction was committed"
        assert all(not a[k]["dataChange"] for a in optimize for k in ("add", "remove") if k in a)
        _vacuumed_by_the_worker(store, monkeypatch)
        assert data_files_on_disk(location) == active_files(spark, location)
    import_one_at_a_time(reference, 24, offset - 24)
    actions = commit_actions(location, "DELETE")
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    fold_version = max(
        int(p.stem)
        for p in Path(location, "_delta_log").glob("*.json")
        if '"DELETE"' in p.read_text()
    )
    # Imports landed between the version it read and its commit.
    assert json.loads(info["userMetadata"])["fold"]["read_version"] < fold_version - 1
    assert info["isolationLevel"] == "SnapshotIsolation"
    assert all(not a[k]["dataChange"] for a in actions for k in ("add", "remove") if k in a)
    assert content(spark, location) == content(spark, unfolded)
    assert store.state.scopes < scopes + (offset - 24)  # the folded scopes were taken off
    scope_rows = spark.read.format("delta").load(location).where("kind = 'scope'").count()
    assert store.state.scopes == scope_rows


def _checkpoint_in_this_process(*_: object) -> None:
    """In place of delta_table.checkpoint: the worker, another process, must write it."""
    raise AssertionError("the checkpoint was written in the store's process")


def _compaction_in_this_process(*_: object) -> None:
    """In place of compaction.plan: the worker, another process, must compute it."""
    raise AssertionError("the compaction was computed in the store's process")


def _compacted_by_the_worker(store: DeltaStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compaction of every small file (a target of 1 GiB), computed by the store's worker and
    committed by the store: fewer files, the same content."""
    monkeypatch.setattr(compaction, "plan", _compaction_in_this_process)
    files = store.file_stats().files
    outcome = store.compact(1 << 30)
    assert outcome is not None, "the worker found no small files to compact"
    assert outcome.files_before == files
    assert outcome.files_after is not None
    assert outcome.files_after < files
    assert store.file_stats().files == outcome.files_after


def _vacuum_in_this_process(*_: object) -> None:
    """In place of delta_table.vacuum: the worker, another process, must run it."""
    raise AssertionError("VACUUM ran in the store's process")


def _vacuumed_by_the_worker(store: DeltaStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A VACUUM with no retention, run by the store's worker: it deletes the files the fold and
    the compaction replaced, and commits nothing."""
    monkeypatch.setattr(delta_table, "vacuum", _vacuum_in_this_process)
    store.set_retention(0.0, 3600.0)
    versions = len(store.history())
    outcome = store.vacuum()
    assert outcome.files_deleted > 0
    assert outcome.bytes_reclaimed > 0
    assert len(store.history()) == versions


def _nice(pid: int) -> int:
    """A process's nice value (/proc/PID/stat, field 19)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[16])


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if parent == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.slow
def test_the_fold_worker_folds_and_checkpoints_a_store_on_s3(
    spark: Any, s3_service: S3Service, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On s3a:// the worker reaches the store with the credentials of the store's session (sent
    on its input): the store commits the fold and the compaction it computed, and it writes
    the checkpoint and runs VACUUM."""
    s3 = services.s3_client(s3_service)
    s3.create_bucket(Bucket=unique_name)
    services.use_s3(spark, s3_service)
    location = f"s3a://{unique_name}/store"

    monkeypatch.setattr(delta_table, "checkpoint", _checkpoint_in_this_process)
    # As a daemon's: the s3a settings in the Spark settings, the credentials apart.
    settings = services.s3a_settings(s3_service)
    credentials = {k: settings.pop(k) for k in (ACCESS_KEY, SECRET_KEY)}
    conf = dict(spark.sparkContext.getConf().getAll())
    conf |= {f"spark.hadoop.{k}": v for k, v in settings.items()}
    with FoldWorker(conf, hadoop=credentials) as worker:
        store = DeltaStore(spark, location, worker)
        store.open()
        import_one_at_a_time(store, 0, 8)
        _, expected = content(spark, location)
        assert store.state is not None
        scopes = store.state.scopes
        store.fold(1000)
        assert store.state.scopes < scopes
        _compacted_by_the_worker(store, monkeypatch)
        _vacuumed_by_the_worker(store, monkeypatch)
        active = store.file_stats().files
        store.checkpoint()
    objects = s3.list_objects_v2(Bucket=unique_name, Prefix="store/part-")["Contents"]
    assert len(objects) == active  # what VACUUM left: the files the last version reads
    listed = s3.list_objects_v2(Bucket=unique_name, Prefix="store/_delta_log/")["Contents"]
    versions = [int(Path(o["Key"]).stem) for o in listed if o["Key"].endswith(".json")]
    described = s3.get_object(Bucket=unique_name, Key="store/_delta_log/_last_checkpoint")
    assert json.loads(described["Body"].read())["version"] == max(versions)
    assert commit_actions_on_s3(s3, unique_name, versions, "DELETE"), "no fold was committed"
    assert commit_actions_on_s3(s3, unique_name, versions, "OPTIMIZE"), "no compaction"
    assert content(spark, location) == (7, expected)


def commit_actions_on_s3(s3: Any, bucket: str, versions: list[int], operation: str) -> bool:
    """Whether a commit of ``operation`` is in the log of the store at ``bucket``/store."""
    for version in versions:
        body = s3.get_object(Bucket=bucket, Key=f"store/_delta_log/{version:020d}.json")["Body"]
        for line in body.read().decode().splitlines():
            if json.loads(line).get("commitInfo", {}).get("operation") == operation:
                return True
    return False
