"""The read model (subscriber/reads/model.py) on random streams: after every commit its tree
equals the store's current tree, at the store's offset, through adds, deep and shallow
deletes, updates, batches, folds, commits that fail before or after landing, another writer's
commits and restarts; and a read never sees an offset lower than one it already answered."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal.wire import messages as m
from runtime.errors import ConfigError
from subscriber.errors import Unavailable
from subscriber.reads.model import ReadModel
from subscriber.reads.sources import read_model
from subscriber.settings import SubscriberSettings
from subscriber.store.changes import ChangeSet, Unit
from subscriber.store.memory import MemoryStore
from subscriber.store.rows import StoredNode
from tests.subscriber.packages import add, delete, new_change_set, node, package, unit

PATHS = ["/a", "/a/b", "/a/b/c", "/a/d", "/e", "/e/f"]
WAIT_S = 10.0

ops = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(PATHS), st.booleans(), st.integers(0, 3)),
    st.tuples(st.just("delete"), st.sampled_from(PATHS), st.booleans(), st.just(0)),
    st.tuples(st.just("test"), st.just("/"), st.just(False), st.just(0)),
    st.tuples(st.just("fold"), st.just("/"), st.just(False), st.just(0)),
    st.tuples(st.just("fail"), st.sampled_from(PATHS), st.booleans(), st.just(0)),
    st.tuples(st.just("foreign"), st.sampled_from(PATHS), st.booleans(), st.just(0)),
    st.tuples(st.just("restart"), st.just("/"), st.just(False), st.just(0)),
)


def package_unit(kind: str, path: str, deep: bool, value: int, offset: int) -> Unit:
    if kind == "delete":
        return delete(offset, path, deep=deep)
    if kind == "test":
        return unit(offset, package(f"p{offset}", m.ReqType.TEST, [("/", True)]))
    below = [p for p in PATHS if p.startswith(path + "/")] if deep else []
    return add(
        offset, path, *(node(p, v=f"{offset}-{value}") for p in [path, *below[:value]]), deep=deep
    )


def model_of(store: MemoryStore, workdir: Path) -> ReadModel:
    settings = SubscriberSettings(agent_name="reader")
    model = read_model(settings, store, workdir, lambda: None)
    assert model is not None
    return model.start()


def tree(model: ReadModel) -> tuple[int | None, list[StoredNode]]:
    answer = model.read(lambda r: list(r.all_nodes()))
    return answer.processed, answer.value


def expected(store: MemoryStore) -> tuple[int | None, list[StoredNode]]:
    return store.shared.offset, store.nodes("/")


def caught_up(model: ReadModel, store: MemoryStore) -> None:
    assert model.wait_version(store.shared.version, WAIT_S), "the model did not catch up"
    assert tree(model) == expected(store)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.lists(ops, min_size=1, max_size=3), min_size=1, max_size=12))
def test_model_equals_the_current_tree_after_every_commit(
    tmp_path: Path, batches: list[list[tuple[str, str, bool, int]]]
) -> None:
    store = MemoryStore()
    store.open()
    model = model_of(store, tmp_path)
    offset = 0
    try:
        caught_up(model, store)
        for batch in batches:
            changes = ChangeSet()
            for kind, path, deep, value in batch:
                if kind == "fold":
                    store.fold(10)
                elif kind == "restart":
                    model.stop()
                    store = store.view()
                    store.open()
                    model = model_of(store, tmp_path)
                elif kind == "foreign":  # another process writes the store
                    other = store.view()
                    other.open()
                    other.commit(new_change_set([package_unit("add", path, deep, 1, offset)]))
                    offset += 1
                    store.open()
                elif kind == "fail":
                    store.fail_commits, store.fail_after_landing = 1, deep
                    with contextlib.suppress(RuntimeError):
                        store.commit(new_change_set([package_unit("add", path, True, 1, offset)]))
                    offset += 1
                else:
                    changes.add(package_unit(kind, path, deep, value, offset))
                    offset += 1
            if changes.units:
                store.commit(changes)
            caught_up(model, store)
    finally:
        model.stop()


def test_a_read_never_goes_back_to_a_lower_offset(tmp_path: Path) -> None:
    store = MemoryStore()
    store.open()
    model = model_of(store, tmp_path)
    try:
        store.commit(new_change_set([add(0, "/a", node("/a", v="1"))]))
        store.commit(new_change_set([add(1, "/a", node("/a", v="2"))]))
        caught_up(model, store)
        # The table replaced by an older copy (a restore) under a running model.
        store.shared.offset = 0
        store.tree["/a"] = store.tree["/a"].__class__(
            "/a", {"v": ("string", False, ["1"])}, {}, 0, "p0"
        )
        store.shared.version += 1
        store.open()
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                answer = model.read(lambda r: r.node("/a"))
            except Unavailable as refused:
                if "went back" in refused.reason:
                    break
                time.sleep(0.01)
                continue
            assert answer.processed == 1, "a lower offset than one served was answered"
        else:
            raise AssertionError("the model never saw the table go back")
    finally:
        model.stop()


def test_the_index_directory_is_made_when_missing(tmp_path: Path) -> None:
    store = MemoryStore()
    store.open()
    model = model_of(store, tmp_path / "not" / "there")
    try:
        store.commit(new_change_set([add(0, "/a", node("/a", v="1"))]))
        caught_up(model, store)
    finally:
        model.stop()
    assert (tmp_path / "not" / "there").is_dir()


def test_an_index_directory_that_cannot_be_made_stops_the_start(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    store = MemoryStore()
    store.open()
    with pytest.raises(ConfigError, match="read index directory"):
        model_of(store, tmp_path / "file" / "below")
