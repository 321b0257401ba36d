"""Net effect of package batches on the tree (no Spark)."""

from __future__ import annotations

import random

import pytest

from journal.content.rules import ContentRuleError, check_package, is_within
from journal.wire.messages import ReqType
from subscriber.store.changes import ChangeSet, Scope, Unit
from tests.subscriber.packages import add, delete, new_change_set, node


def tree_after(stored: set[str], changes: ChangeSet, stored_at: int = 0) -> dict[str, int]:
    """The current tree (path -> offset) after ``changes`` on ``stored`` (written at
    ``stored_at``), applied as a store does: what a scope covers goes, the upserts come."""
    tree = {p: stored_at for p in stored if not any(s.covers(p, stored_at) for s in changes.scopes)}
    tree.update((p, o) for p, (o, _) in changes.node_offsets.items())
    return tree


def test_add_to_empty_store() -> None:
    cs = new_change_set([add(1, "/a", node("/a"), node("/a/b"))])
    assert set(cs.upserts) == {"/a", "/a/b"}
    assert cs.scopes == [Scope("/a", True, 1)]
    assert tree_after(set(), cs) == {"/a": 1, "/a/b": 1}


def test_deep_add_replaces_the_subtree() -> None:
    cs = new_change_set([add(5, "/a", node("/a"), node("/a/b"))])
    assert tree_after({"/a", "/a/old", "/a/b", "/other"}, cs) == {"/a": 5, "/a/b": 5, "/other": 0}


def test_shallow_add_touches_one_node() -> None:
    cs = new_change_set([add(1, "/a", node("/a", title="t"), deep=False)])
    assert cs.scopes == [Scope("/a", False, 1)]
    assert tree_after({"/a", "/a/old"}, cs) == {"/a": 1, "/a/old": 0}


def test_deep_and_shallow_delete() -> None:
    existing = {"/a", "/a/b", "/a/b/c", "/ab"}
    assert tree_after(existing, new_change_set([delete(1, "/a")])) == {"/ab": 0}
    shallow = new_change_set([delete(1, "/a/b", deep=False)])
    assert tree_after(existing, shallow) == {"/a": 0, "/a/b/c": 0, "/ab": 0}
    assert not shallow.upserts


def test_a_scope_covers_only_older_versions() -> None:
    scope = Scope("/a", True, 5)
    assert scope.covers("/a", 4)
    assert scope.covers("/a/b/c", 0)
    assert not scope.covers("/a", 5)  # the package's own nodes
    assert not scope.covers("/a/b", 6)
    assert not scope.covers("/ab", 0)
    assert Scope("/", True, 1).covers("/x/y", 0)
    assert not Scope("/a", False, 5).covers("/a/b", 0)


def test_order_within_a_batch_matters() -> None:
    cs = new_change_set(
        [add(1, "/a/x", node("/a/x")), delete(2, "/a"), add(3, "/a/y", node("/a/y"))]
    )
    assert set(cs.upserts) == {"/a/y"}
    assert cs.node_offsets["/a/y"] == (3, "p3")
    assert tree_after({"/a"}, cs) == {"/a/y": 3}
    again = new_change_set([delete(1, "/a"), add(2, "/a", node("/a"), node("/a/z"))])
    assert set(again.upserts) == {"/a", "/a/z"}
    assert tree_after({"/a", "/a/old"}, again) == {"/a": 2, "/a/z": 2}


# A package reaches a change set only after the content rules (journal/content/rules.py) passed:
# these are the packages the rules stop before.
@pytest.mark.parametrize("bad", ["relative", "/a/../b", "/a//b", "/a/./b", "/a\x00b"])
def test_bad_paths_are_refused(bad: str) -> None:
    unit = add(1, "/", node(bad))
    assert unit.package is not None
    with pytest.raises(ContentRuleError, match="node path"):
        check_package(unit.package, unit.req_type)


def test_node_outside_the_filter_is_refused() -> None:
    unit = add(1, "/a", node("/b"))
    assert unit.package is not None
    with pytest.raises(ContentRuleError, match="outside"):
        check_package(unit.package, unit.req_type)


def test_offsets_must_increase() -> None:
    cs = new_change_set([add(3, "/a", node("/a"))])
    with pytest.raises(ValueError):
        cs.add(add(3, "/a", node("/a")))


def naive_tree(stored: dict[str, int], units: list[Unit]) -> dict[str, int]:
    """Each package applied alone, in order, to path -> offset (the semantics, written out)."""
    tree = dict(stored)
    for u in units:
        assert u.package is not None
        for root in u.package.roots:
            for path in list(tree):
                if path == root.path or (root.deep and is_within(path, root.path)):
                    del tree[path]
        if u.req_type == ReqType.ADD:
            tree.update((n.path, u.offset) for n in u.package.nodes)
    return tree


@pytest.mark.parametrize("seed", range(20))
def test_a_batch_has_the_effect_of_its_packages_one_by_one(seed: int) -> None:
    rng = random.Random(seed)
    paths = ["/a", "/a/b", "/a/b/c", "/a/bc", "/ab", "/e", "/e/f"]
    stored = {p: -1 for p in paths if rng.random() < 0.5}
    units: list[Unit] = []
    for offset in range(rng.randrange(1, 30)):
        root, deep = rng.choice(paths), rng.random() < 0.5
        if rng.random() < 0.3:
            units.append(delete(offset, root, deep=deep))
        else:
            below = [p for p in paths if p == root or (deep and is_within(p, root))]
            units.append(
                add(
                    offset,
                    root,
                    *(node(p) for p in below if rng.random() < 0.7 or p == root),
                    deep=deep,
                )
            )
    changes = new_change_set(units)
    assert tree_after(set(stored), changes, stored_at=-1) == naive_tree(stored, units)
