"""The Delta content store on real Spark: commits, reopen, clone, history."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest

from journal.wire.messages import Status
from subscriber.changes import new_change_set
from subscriber.store import ContentStore
from tests.subscriber.packages import add, delete, node

pytestmark = pytest.mark.integration


def test_commits_reopen_and_history(spark: Any, tmp_path: Path) -> None:
    location = str(tmp_path / "store")
    store = ContentStore(spark, location)
    state = store.open()
    assert state.offset is None and state.clear_offset == -1
    instance = state.instance_id

    store.commit(
        new_change_set(store.paths, [add(0, "/a", node("/a", title="A"), node("/a/b", n=7))])
    )
    first = add(1, "/a", node("/a", title="A2"), node("/a/c", data=b"\x00\x01"))
    first = dataclasses.replace(first, status=Status.IMPORTED)
    store.commit(new_change_set(store.paths, [first, delete(2, "/x")]))
    assert store.paths == {"/a", "/a/c"}

    again = ContentStore(spark, location)
    state = again.open()
    assert state.instance_id == instance
    assert state.offset == 2
    assert state.pending_statuses == [(1, "publish", "IMPORTED")]
    assert again.paths == {"/a", "/a/c"}
    a = again.node("/a")
    assert a is not None and a.properties["title"] == ("string", False, ["A2"]) and a.offset == 1
    c = again.node("/a/c")
    assert c is not None and c.binaries["data"].data == b"\x00\x01"
    assert [n.path for n in again.nodes("/a")] == ["/a", "/a/c"]

    history = [h for h in again.history() if h["metadata"] and "offsets" in h["metadata"]]
    assert [h["metadata"]["offsets"] for h in history] == [[0, 0], [1, 2]]
    assert [h["operation"] for h in history] == ["WRITE", "MERGE"]

    again.forget_statuses(1)
    assert ContentStore(spark, location).open().pending_statuses == []

    clone = str(tmp_path / "clone")
    shutil.copytree(location, clone)
    cloned = ContentStore(spark, clone)
    cstate = cloned.open()
    assert cstate.offset == 2 and cloned.paths == {"/a", "/a/c"}
    assert cstate.instance_id != instance  # a copy is a new subscriber instance

    assert (
        spark.sql(f"SELECT count(*) AS n FROM delta.`{location}` WHERE kind = 'node'").first()["n"]
        == 2
    )


def test_clear_offset_only_grows(spark: Any, tmp_path: Path) -> None:
    store = ContentStore(spark, str(tmp_path / "s"))
    store.open()
    assert store.record_clear(5) == 5
    assert store.record_clear(3) == 5
    assert ContentStore(spark, str(tmp_path / "s")).open().clear_offset == 5
