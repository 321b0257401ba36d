"""Net effect of package batches on the tree (no Spark)."""

from __future__ import annotations

import pytest

from journal.wire.rules import ContentRuleError, check_package
from subscriber.changes import new_change_set
from tests.subscriber.packages import add, delete, node


def test_add_to_empty_store_is_insert_only() -> None:
    cs = new_change_set(set(), [add(0, "/a", node("/a"), node("/a/b"))])
    assert set(cs.upserts) == {"/a", "/a/b"}
    assert cs.inserts_only
    assert not cs.deletes


def test_deep_add_replaces_the_subtree() -> None:
    cs = new_change_set(
        {"/a", "/a/old", "/a/b", "/other"}, [add(5, "/a", node("/a"), node("/a/b"))]
    )
    assert cs.deletes == {"/a/old"}
    assert set(cs.upserts) == {"/a", "/a/b"}
    assert not cs.inserts_only


def test_shallow_add_touches_one_node() -> None:
    cs = new_change_set({"/a", "/a/old"}, [add(1, "/a", node("/a", title="t"), deep=False)])
    assert not cs.deletes
    assert set(cs.upserts) == {"/a"}


def test_deep_and_shallow_delete() -> None:
    existing = {"/a", "/a/b", "/a/b/c", "/ab"}
    assert new_change_set(existing, [delete(1, "/a")]).deletes == {"/a", "/a/b", "/a/b/c"}
    assert new_change_set(existing, [delete(1, "/a/b", deep=False)]).deletes == {"/a/b"}


def test_order_within_a_batch_matters() -> None:
    cs = new_change_set(
        {"/a"}, [add(1, "/a/x", node("/a/x")), delete(2, "/a"), add(3, "/a/y", node("/a/y"))]
    )
    assert cs.deletes == {"/a"}
    assert set(cs.upserts) == {"/a/y"}
    assert cs.node_offsets["/a/y"] == (3, "p3")
    again = new_change_set(set(), [delete(1, "/a"), add(2, "/a", node("/a"), node("/a/z"))])
    assert set(again.upserts) == {"/a", "/a/z"}
    assert not again.deletes


# A package reaches a change set only after the content rules (journal/wire/rules.py) passed:
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
    cs = new_change_set(set(), [add(3, "/a", node("/a"))])
    with pytest.raises(ValueError):
        cs.add(add(3, "/a", node("/a")))
