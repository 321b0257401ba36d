"""Contract of the subscriber's content store (subscriber/store/base.py ``Store``): every store
runs this suite unchanged, so the memory store the fast tests use is proven to behave as the
Delta store the product uses.

A store's test module subclasses ``StoreContract`` and provides the fixture ``stores``: a
:class:`Stores` that opens a new, empty store and the same store again as another process
would.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import pytest

from journal.wire.messages import Status
from subscriber.errors import WriterDeposed
from subscriber.store.base import Store
from tests.subscriber.packages import add, delete, new_change_set, node


class Stores(Protocol):
    def new(self) -> Store:
        """A new, empty store (not opened)."""

    def again(self, store: Store) -> Store:
        """The same store as a freshly started process sees it (not opened)."""


def paths(store: Store, root: str = "/", *, deep: bool = True) -> list[str]:
    return [n.path for n in store.nodes(root, deep=deep)]


class StoreContract:
    def test_a_new_store_is_empty_and_has_no_offset(self, stores: Stores) -> None:
        store = stores.new()
        state = store.open()
        assert state.offset is None
        assert state.clear_offset("publish") == -1
        assert state.pending_statuses == []
        assert store.nodes() == []
        assert store.node("/a") is None

    def test_a_commit_lands_content_offset_and_statuses_together(self, stores: Stores) -> None:
        store = stores.new()
        instance = store.open().instance_id
        store.commit(new_change_set([add(0, "/a", node("/a", title="A"), node("/a/b", n=7))]))
        replaced = dataclasses.replace(
            add(1, "/a", node("/a", title="A2"), node("/a/c", data=b"\x00\x01")),
            status=Status.IMPORTED,
        )
        store.commit(new_change_set([replaced, delete(2, "/x")]))

        again = stores.again(store)
        state = again.open()
        assert state.instance_id == instance
        assert state.offset == 2
        assert state.pending_statuses == [(1, "publish", "IMPORTED", 0)]
        assert paths(again) == ["/a", "/a/c"]
        a = again.node("/a")
        assert a is not None
        assert a.properties["title"] == ("string", False, ["A2"])
        assert (a.offset, a.pkg_id) == (1, "p1")
        c = again.node("/a/c")
        assert c is not None
        assert c.binaries["data"].data == b"\x00\x01"
        assert again.nodes() == store.nodes()

    def test_deep_and_shallow_deletes(self, stores: Stores) -> None:
        store = stores.new()
        store.open()
        tree = [node(p) for p in ("/a", "/a/b", "/a/b/c", "/a/d", "/ab")]
        store.commit(new_change_set([add(0, "/", *tree)]))
        store.commit(new_change_set([delete(1, "/a/d", deep=False), delete(2, "/a/b")]))
        # /a/d alone, /a/b with /a/b/c; /ab shares a prefix with /a but is not below it.
        assert paths(store) == ["/a", "/ab"]
        assert paths(stores.again(store)) == ["/a", "/ab"]

    def test_nodes_deep_and_shallow(self, stores: Stores) -> None:
        store = stores.new()
        store.open()
        tree = [node(p) for p in ("/a", "/a/b", "/a/b/c", "/a/d", "/ab")]
        store.commit(new_change_set([add(0, "/a", *tree[:4]), add(1, "/ab", tree[4])]))
        assert paths(store, "/a") == ["/a", "/a/b", "/a/b/c", "/a/d"]
        assert paths(store, "/a", deep=False) == ["/a", "/a/b", "/a/d"]
        assert paths(store, "/a/b/c") == ["/a/b/c"]

    def test_record_offset_moves_the_offset_and_nothing_else(self, stores: Stores) -> None:
        store = stores.new()
        store.open()
        store.commit(new_change_set([add(0, "/a", node("/a"))]))
        store.record_offset(7, "start position")
        again = stores.again(store)
        assert again.open().offset == 7
        assert paths(again) == ["/a"]

    def test_the_clear_offset_only_grows(self, stores: Stores) -> None:
        store = stores.new()
        store.open()
        assert store.record_clear(5, "publish") == 5
        assert store.record_clear(3, "publish") == 5
        state = stores.again(store).open()
        assert state.clear_offset("publish") == 5
        assert state.clear_offset("other") == -1

    def test_sequence_numbers_are_committed_with_the_content_and_only_grow(
        self, stores: Stores
    ) -> None:
        store = stores.new()
        store.open()
        first = add(0, "/a", node("/a"))
        other = dataclasses.replace(delete(1, "/b"), pub_agent="other", sequence=7)
        store.commit(new_change_set([dataclasses.replace(first, sequence=3), other]))
        store.commit(new_change_set([dataclasses.replace(add(2, "/c", node("/c")), sequence=4)]))
        assert store.record_clear(1, "publish", sequence=2) == 1
        assert store.record_clear(0, "publish", sequence=1) == 1  # an older command: no change
        # A clear by package number (no offset), then an older one: the number only grows.
        assert store.record_clear(-1, "publish", sequence=3, up_to_sequence=9) == 1
        assert store.record_clear(-1, "publish", sequence=4, up_to_sequence=8) == 1
        store.forget_statuses(2)  # the purge reduces the rows and keeps the current numbers
        state = stores.again(store).open()
        assert state.sequences == {"publish": 4, "other": 7}
        assert state.command_sequences == {"publish": 4}
        assert state.clear_sequences == {"publish": 9}
        assert state.cleared("publish", 100, 9)
        assert not state.cleared("publish", 100, 10)
        assert not state.cleared("publish", 100, 0)  # not numbered: only an offset covers it
        assert state.cleared("publish", 1, 0)
        assert paths(store) == ["/a", "/c"]

    def test_the_pause_state_and_its_command_number_survive_a_restart(self, stores: Stores) -> None:
        store = stores.new()
        assert store.open().paused is False
        store.commit(new_change_set([add(0, "/a", node("/a"))]))
        store.record_pause(True, "publish", 3)
        state = stores.again(store).open()
        assert (state.paused, state.command_sequences) == (True, {"publish": 3})
        store.record_pause(False, "publish", 4)
        store.record_pause(True, "publish", 5)
        store.forget_statuses(0)  # the purge keeps the pause rows
        state = stores.again(store).open()
        assert (state.paused, state.command_sequences, state.offset) == (True, {"publish": 5}, 0)
        store.record_pause(False, "publish", 6)
        assert stores.again(store).open().paused is False

    def test_pending_statuses_keep_their_sequence_numbers(self, stores: Stores) -> None:
        store = stores.new()
        store.open()
        units = [
            dataclasses.replace(
                add(i, f"/p{i}", node(f"/p{i}")), status=Status.REMOVED_FAILED, sequence=n
            )
            for i, n in ((0, 7), (1, 0))
        ]
        store.commit(new_change_set(units))
        expected = [(0, "publish", "REMOVED_FAILED", 7), (1, "publish", "REMOVED_FAILED", 0)]
        assert store.state is not None
        assert store.state.pending_statuses == expected
        assert stores.again(store).open().pending_statuses == expected

    def test_forgotten_statuses_are_not_pending_after_a_restart(self, stores: Stores) -> None:
        store = stores.new()
        store.open()
        units = [
            dataclasses.replace(add(i, f"/p{i}", node(f"/p{i}")), status=Status.IMPORTED)
            for i in range(3)
        ]
        store.commit(new_change_set(units))
        store.forget_statuses(1)
        pending = stores.again(store).open().pending_statuses
        assert pending == [(2, "publish", "IMPORTED", 0)]

    def test_fold_keeps_the_current_tree(self, stores: Stores) -> None:
        store = stores.new()
        store.open()
        for offset in range(4):
            store.commit(
                new_change_set([add(offset, "/a", node("/a", v=str(offset)), node(f"/a/{offset}"))])
            )
        before = store.nodes()
        store.fold(100)
        assert store.nodes() == before
        again = stores.again(store)
        assert again.open().scopes == 0
        assert again.nodes() == before
        assert paths(again) == ["/a", "/a/3"]

    def test_a_later_claim_deposes_the_earlier_writer(self, stores: Stores) -> None:
        first = stores.new()
        first.claim(1, "writer-1")
        first.open()
        first.commit(new_change_set([add(0, "/x", node("/x"))]))
        second = stores.again(first)
        second.claim(2, "writer-2")
        second.open()
        with pytest.raises(WriterDeposed):
            first.commit(new_change_set([add(1, "/y", node("/y"))]))
        with pytest.raises(WriterDeposed):
            first.record_offset(5, "skip")
        with pytest.raises(WriterDeposed):
            stores.again(first).claim(1, "writer-1 again")
        second.commit(new_change_set([add(1, "/z", node("/z"))]))
        state = stores.again(first).open()
        assert state.offset == 1
        assert paths(stores.again(first)) == ["/x", "/z"]
