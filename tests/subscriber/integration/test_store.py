"""The Delta content store on real Spark: commits, reopen, clone, history."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from journal.wire.messages import Status
from subscriber.errors import WriterDeposed
from subscriber.store.current_tree import current_nodes_sql
from subscriber.store.delta import (
    CHECKPOINT_INTERVAL,
    CHECKPOINT_PROPERTY,
    DeltaStore,
)
from subscriber.store.rows import SCHEMA, node_row, rows_frame
from tests.subscriber.harness import committed_offsets, last_checkpoint, stored_paths
from tests.subscriber.packages import add, delete, new_change_set, node

pytestmark = pytest.mark.integration


def test_commits_reopen_and_history(spark: Any, tmp_path: Path) -> None:
    location = str(tmp_path / "store")
    store = DeltaStore(spark, location)
    state = store.open()
    assert state.offset is None
    assert state.clear_offset("publish") == -1
    instance = state.instance_id

    store.commit(new_change_set([add(0, "/a", node("/a", title="A"), node("/a/b", n=7))]))
    first = add(1, "/a", node("/a", title="A2"), node("/a/c", data=b"\x00\x01"))
    first = dataclasses.replace(first, status=Status.IMPORTED)
    store.commit(new_change_set([first, delete(2, "/x")]))
    assert stored_paths(store) == {"/a", "/a/c"}

    again = DeltaStore(spark, location)
    state = again.open()
    assert state.instance_id == instance
    assert state.offset == 2
    assert state.pending_statuses == [(1, "publish", "IMPORTED", 0)]
    assert stored_paths(again) == {"/a", "/a/c"}
    a = again.node("/a")
    assert a is not None
    assert a.properties["title"] == ("string", False, ["A2"])
    assert a.offset == 1
    c = again.node("/a/c")
    assert c is not None
    assert c.binaries["data"].data == b"\x00\x01"
    assert [n.path for n in again.nodes("/a")] == ["/a", "/a/c"]

    history = [h for h in again.history() if h["metadata"] and "offsets" in h["metadata"]]
    assert [h["metadata"]["offsets"] for h in history] == [[0, 0], [1, 2]]
    # Imports only append: the update and the delete were written as a version and scopes.
    assert [h["operation"] for h in history] == ["WRITE", "WRITE"]
    assert [h["metadata"]["scopes"] for h in history] == [1, 2]

    again.forget_statuses(1)
    assert DeltaStore(spark, location).open().pending_statuses == []

    clone = str(tmp_path / "clone")
    shutil.copytree(location, clone)
    cloned = DeltaStore(spark, clone)
    cstate = cloned.open()
    assert cstate.offset == 2
    assert stored_paths(cloned) == {"/a", "/a/c"}
    assert cstate.instance_id != instance  # a copy is a new subscriber instance

    def rows(kind: str) -> int:
        query = f"SELECT count(*) AS n FROM delta.`{location}` WHERE kind = '{kind}'"
        return int(spark.sql(query).first()["n"])

    current = f"SELECT path FROM ({current_nodes_sql(f'delta.`{location}`')}) ORDER BY path"
    assert [r["path"] for r in spark.sql(current).collect()] == ["/a", "/a/c"]
    assert (rows("node"), rows("scope")) == (4, 3)  # /a and /a/b replaced, not yet folded
    assert again.state is not None
    assert again.state.scopes == 3
    again.fold(max_scopes=1000)
    assert (rows("node"), rows("scope")) == (2, 0)
    assert again.state.scopes == 0
    assert [r["path"] for r in spark.sql(current).collect()] == ["/a", "/a/c"]
    assert stored_paths(again) == {"/a", "/a/c"}


def test_clear_offset_only_grows(spark: Any, tmp_path: Path) -> None:
    store = DeltaStore(spark, str(tmp_path / "s"))
    store.open()
    assert store.record_clear(5, "publish") == 5
    assert store.record_clear(3, "publish") == 5
    assert DeltaStore(spark, str(tmp_path / "s")).open().clear_offset("publish") == 5


# Paths that scopes, reads and folds must quote exactly: SQL quotes and escapes, wildcards, a
# newline, non-ASCII text, and a prefix of another path.
AWKWARD_PATHS = [
    "/q/it's",
    "/q/back\\slash",
    "/q/back\\",
    "/q/100%_off",
    "/q/line\nbreak",
    "/q/ünïcødé ✓",
    "/q/x') OR ('1' = '1",
    "/q/a",
    "/q/ab",
]


def test_updates_and_deletes_of_awkward_paths_touch_only_those_nodes(
    spark: Any, tmp_path: Path
) -> None:
    store = DeltaStore(spark, str(tmp_path / "awkward"))
    store.open()
    store.commit(new_change_set([add(0, "/q", *(node(p, v="old") for p in AWKWARD_PATHS))]))
    updated, deleted = AWKWARD_PATHS[0::2], AWKWARD_PATHS[1::2]
    store.commit(
        new_change_set(
            [
                add(1, updated[0], node(updated[0], v="new"), deep=False),
                *(add(2 + i, p, node(p, v="new"), deep=False) for i, p in enumerate(updated[1:])),
                *(delete(10 + i, p, deep=False) for i, p in enumerate(deleted)),
            ],
        )
    )
    nodes = {n.path: n.properties["v"][2] for n in DeltaStore(spark, store.location).nodes("/q")}
    assert nodes == {p: ["new"] for p in updated}
    for path in AWKWARD_PATHS:
        found = store.node(path)
        assert (found and found.properties["v"][2]) == (["new"] if path in updated else None)
    # A deep delete whose path would break an unquoted predicate; folding keeps the tree.
    gone = "/q/x') OR ('1' = '1"
    store.commit(new_change_set([delete(20, gone, deep=True)]))
    store.fold(max_scopes=1000)
    assert store.state is not None
    assert store.state.scopes == 0
    left = {n.path: n.properties["v"][2] for n in DeltaStore(spark, store.location).nodes("/q")}
    assert left == {p: ["new"] for p in updated if p != gone}
    rows = spark.read.format("delta").load(store.location).where("kind = 'node'").count()
    assert rows == len(left)


def test_a_commit_that_errs_after_landing_counts_as_committed(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The error came after Delta wrote the commit: the batch is in, not to be imported again;
    an error before the write still fails the commit."""
    store = DeltaStore(spark, str(tmp_path / "errs"))
    store.open()
    write = store._write

    def lands_then_fails(*args: Any, **kwargs: Any) -> None:
        write(*args, **kwargs)
        raise RuntimeError("connection reset after the commit")

    def fails(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("connection refused")

    monkeypatch.setattr(store, "_write", lands_then_fails)
    store.commit(new_change_set([add(0, "/e", node("/e", v="1"))]))
    assert store.state is not None
    assert store.state.offset == 0
    assert stored_paths(store) == {"/e"}
    monkeypatch.setattr(store, "_write", fails)
    with pytest.raises(RuntimeError, match="refused"):
        store.commit(new_change_set([add(1, "/f", node("/f", v="1"))]))
    assert store.committed_offset() == 0
    assert stored_paths(store) == {"/e"}


def test_the_table_has_the_declared_schema(spark: Any, tmp_path: Path) -> None:
    """Rows reach Spark as an Arrow table: the frame has SCHEMA exactly, the table its types."""
    from pyspark.sql.types import StructType

    store = DeltaStore(spark, str(tmp_path / "store"))
    store.open()
    store.commit(new_change_set([add(0, "/a", node("/a", title="A", data=b"\x01"))]))
    declared = StructType.fromDDL(SCHEMA)
    assert isinstance(declared, StructType)
    assert rows_frame(spark, []).schema == declared
    table = spark.read.format("delta").load(store.location)
    # Spark's file writers store every column as nullable; the types are the declared ones.
    assert [(f.name, f.dataType) for f in table.schema] == [(f.name, f.dataType) for f in declared]


def _checkpoint_interval(spark: Any, location: str) -> str | None:
    from delta.tables import DeltaTable

    detail = DeltaTable.forPath(spark, location).detail().first()
    assert detail is not None
    properties = detail["properties"]
    value = properties.get(CHECKPOINT_PROPERTY)
    return None if value is None else str(value)


def test_checkpoints_come_from_the_store_not_every_tenth_commit(spark: Any, tmp_path: Path) -> None:
    """A new table checkpoints itself only every CHECKPOINT_INTERVAL commits; ``checkpoint()``
    writes one of the latest version when the agent's maintenance asks for it."""
    from delta.tables import DeltaTable

    store = DeltaStore(spark, str(tmp_path / "store"))
    store.open()
    assert _checkpoint_interval(spark, store.location) == str(CHECKPOINT_INTERVAL)
    for offset in range(12):  # past Delta's default interval of 10
        store.commit(new_change_set([add(offset, f"/c{offset}", node(f"/c{offset}"))]))
    assert last_checkpoint(store.location) is None
    assert store.commits_since_checkpoint == 13  # the instance row, then 12 imports

    store.checkpoint()
    latest = DeltaTable.forPath(spark, store.location).history(1).first()
    assert latest is not None
    assert last_checkpoint(store.location) == latest["version"]
    assert store.commits_since_checkpoint == 0
    assert len(DeltaStore(spark, store.location).nodes("/")) == 12


def test_an_existing_table_gets_the_interval_unless_its_owner_chose_one(
    spark: Any, tmp_path: Path
) -> None:
    bare = str(tmp_path / "bare")
    rows_frame(spark, []).write.format("delta").save(bare)
    DeltaStore(spark, bare).open()
    assert _checkpoint_interval(spark, bare) == str(CHECKPOINT_INTERVAL)

    chosen = str(tmp_path / "chosen")
    rows_frame(spark, []).write.format("delta").option(CHECKPOINT_PROPERTY, "7").save(chosen)
    DeltaStore(spark, chosen).open()
    assert _checkpoint_interval(spark, chosen) == "7"


def _partition_columns(spark: Any, location: str) -> list[str]:
    from delta.tables import DeltaTable

    detail = DeltaTable.forPath(spark, location).detail().first()
    assert detail is not None
    return list(detail["partitionColumns"])


def test_new_tables_are_unpartitioned(spark: Any, tmp_path: Path) -> None:
    fresh = DeltaStore(spark, str(tmp_path / "fresh"))
    fresh.open()
    assert _partition_columns(spark, fresh.location) == []


def test_claimed_stores_in_one_session_and_a_deposed_writer(spark: Any, tmp_path: Path) -> None:
    """Two claimed tables in one Spark session (each at version 0 after its claim) both
    commit; after a claim with the next epoch, the first store's writes are refused and do
    not land, while the other table is unaffected."""
    first, other = DeltaStore(spark, str(tmp_path / "a")), DeltaStore(spark, str(tmp_path / "b"))
    for store in (first, other):
        store.claim(1, "writer-1")
        store.open()
        store.commit(new_change_set([add(0, "/x", node("/x"))]))
    DeltaStore(spark, first.location).claim(2, "writer-2")
    with pytest.raises(WriterDeposed):
        first.commit(new_change_set([add(1, "/y", node("/y"))]))
    with pytest.raises(WriterDeposed):
        first.record_offset(5, "skip")
    other.commit(new_change_set([add(1, "/y", node("/y"))]))
    assert committed_offsets(DeltaStore(spark, first.location)) == [0]
    assert committed_offsets(other) == [0, 1]
    assert DeltaStore(spark, first.location).open().offset == 0


def test_a_fold_commits_only_while_no_import_commits(spark: Any, tmp_path: Path) -> None:
    """The fold does its reading and writing beside the imports but takes the store's commit
    lock for its commit: while an import holds it, the fold's commit waits, and the two never
    race for one table version."""
    import threading

    from delta.tables import DeltaTable

    store = DeltaStore(spark, str(tmp_path / "store"))
    store.open()
    store.commit(new_change_set([add(0, "/a", node("/a", v="1"), node("/a/b"))]))
    store.commit(new_change_set([add(1, "/a", node("/a", v="2"))]))
    table = DeltaTable.forPath(spark, store.location)
    version = _latest(table)["version"]
    folded = threading.Event()

    def fold() -> None:
        store.fold(1000)
        folded.set()

    with store.commit_lock:  # as an import's commit would
        threading.Thread(target=fold, daemon=True).start()
        assert not folded.wait(20)  # it read and wrote its files, then waits to commit
        assert _latest(table)["version"] == version
    assert folded.wait(60)
    # A DELETE (not a MANUAL UPDATE): Delta derives its checksum from the last version's.
    assert _latest(table)["operation"] == "DELETE"
    assert store.state is not None
    assert store.state.scopes == 0
    assert stored_paths(store) == {"/a"}  # the deep ADD of /a replaced /a/b
    found = store.node("/a")
    assert found is not None
    assert found.properties["v"][2] == ["2"]
    assert spark.read.format("delta").load(store.location).where("kind = 'node'").count() == 1


def test_a_fold_whose_files_another_commit_removed_is_dropped(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fold checks the commits that landed since the version it read: one that removed a
    file the fold rewrites (a compaction, committed just before the fold takes the lock) fails
    the fold, and the table keeps the compaction's content, nothing twice."""
    from delta.tables import DeltaTable

    from subscriber.errors import RewriteConflict
    from subscriber.maintenance import compaction, delta_table, rewrites

    store = DeltaStore(spark, str(tmp_path / "store"))
    store.open()
    store.commit(new_change_set([add(0, "/a", node("/a", v="1"), node("/a/b"))]))
    store.commit(new_change_set([add(1, "/a", node("/a", v="2"))]))
    lock = store.commit_lock

    class CompactingFirst:
        def __enter__(self) -> None:
            with delta_table.active_session(store.maintenance_spark) as session:
                compacted = compaction.plan(session, store.location, 1 << 30)
                rewrites.commit(session, store.location, compacted, lock, rewrites.COMPACT)
            lock.__enter__()

        def __exit__(self, *exc: Any) -> None:
            lock.__exit__(*exc)

    monkeypatch.setattr(store, "commit_lock", CompactingFirst())
    with pytest.raises(RewriteConflict, match="which the plan replaces"):
        store.fold(1000)
    assert _latest(DeltaTable.forPath(spark, store.location))["operation"] == "OPTIMIZE"
    assert store.state is not None
    assert store.state.scopes == 2  # nothing folded
    rows = spark.read.format("delta").load(store.location)
    assert rows.where("kind = 'node'").count() == 3  # /a twice and /a/b: none lost or doubled
    assert stored_paths(store) == {"/a"}
    found = store.node("/a")
    assert found is not None
    assert found.properties["v"][2] == ["2"]


def test_a_fold_checks_the_commits_that_landed_while_it_was_planned(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan itself checks the commits since the version it read (in the fold worker, when
    the store has one, not in the store's process): a compaction that lands while the fold is
    computed fails the fold's plan, and the fold's commit checks only the commits after the
    version the plan checked up to."""
    from subscriber.errors import RewriteConflict
    from subscriber.maintenance import compaction, delta_table, rewrites

    store = DeltaStore(spark, str(tmp_path / "store"))
    store.open()
    store.commit(new_change_set([add(0, "/a", node("/a", v="1"), node("/a/b"))]))
    store.commit(new_change_set([add(1, "/a", node("/a", v="2"))]))
    checked_from: list[int] = []
    check_since, commit = rewrites.check_since, rewrites.commit

    def compacting_first(delta_log: Any, version: int, names: set[str]) -> int:
        first = not checked_from
        checked_from.append(version)
        if first:  # the plan's check: a compaction landed while it ran
            with delta_table.active_session(store.maintenance_spark) as session:
                compacted = compaction.plan(session, store.location, 1 << 30)
                commit(session, store.location, compacted, store.commit_lock, rewrites.COMPACT)
        return check_since(delta_log, version, names)

    def not_committed(*_: object) -> None:
        pytest.fail("the fold's plan let a conflicting commit through to the fold's commit")

    monkeypatch.setattr(rewrites, "check_since", compacting_first)
    monkeypatch.setattr(rewrites, "commit", not_committed)
    with pytest.raises(RewriteConflict, match="which the plan replaces"):
        store.fold(1000)
    monkeypatch.setattr(rewrites, "commit", commit)
    assert store.state is not None
    assert store.state.scopes == 2  # nothing folded
    monkeypatch.setattr(rewrites, "check_since", check_since)
    store.commit(new_change_set([add(2, "/c", node("/c"))]))
    with delta_table.active_session(store.maintenance_spark) as session:
        planned = rewrites.plan(session, store.location, 1000)
    assert planned.checked == planned.version  # nothing landed meanwhile
    store.commit(new_change_set([add(3, "/d", node("/d"))]))
    monkeypatch.setattr(rewrites, "check_since", compacting_first)
    checked_from[:] = [-1]  # no compaction this time
    with delta_table.active_session(store.maintenance_spark) as session:
        commit(session, store.location, planned, store.commit_lock)
    assert checked_from[1] == planned.checked  # from where the plan left off
    assert stored_paths(store) == {"/a", "/c", "/d"}


def _latest(table: Any) -> Any:
    """The table's latest history entry."""
    entry = table.history(1).first()
    assert entry is not None
    return entry


def test_a_fold_reads_only_the_files_that_can_hold_what_it_folds(
    spark: Any, tmp_path: Path
) -> None:
    """The fold picks its files by their path and parent statistics: a file of another
    subtree is not read (here it is unreadable, and the fold still succeeds), while the files
    holding the folded scopes and what they cover are rewritten. The other subtree was loaded
    in bulk (node rows, no scope), as a generated store is, so no step of the fold needs it."""
    from delta.tables import DeltaTable

    store = DeltaStore(spark, str(tmp_path / "store"))
    store.open()
    store.commit(new_change_set([add(0, "/near", node("/near", v="1"), node("/near/x"))]))
    store.commit(new_change_set([add(1, "/near", node("/near", v="2"))]))
    loaded = [node_row(node(p), 0, "bulk", "publish", 0) for p in ("/far", "/far/y")]
    rows_frame(spark, loaded).coalesce(1).write.format("delta").mode("append").save(store.location)
    table = DeltaTable.forPath(spark, store.location)
    (far,) = _files_added_by(store.location, _latest(table)["version"])
    intact = far.read_bytes()
    far.write_bytes(b"not a parquet file")  # any read of it fails
    try:
        store.fold(max_scopes=1000)
    finally:
        far.write_bytes(intact)
    assert _latest(table)["operation"] == "DELETE"  # the fold's commit
    assert store.state is not None
    assert store.state.scopes == 0
    rows = spark.read.format("delta").load(store.location).where("kind = 'node'")
    assert sorted((r["path"], r["offset"]) for r in rows.collect()) == [
        ("/far", 0),
        ("/far/y", 0),
        ("/near", 1),
    ]


def _files_added_by(location: str, version: int) -> list[Path]:
    """The data files that version ``version`` of the table at ``location`` added."""
    log = Path(location) / "_delta_log" / f"{version:020d}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    return [Path(location) / unquote(a["add"]["path"]) for a in actions if "add" in a]
