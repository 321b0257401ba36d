from __future__ import annotations

import pytest

from journal.wire.messages import ReqType
from publisher.distribute.request import Action
from publisher.queues.entries import EntrySegment


def test_entries_round_trip_with_deep_paths() -> None:
    segment = EntrySegment()
    segment.append(5, "pkg-a", ReqType.ADD, ["/a", "/b"], ["/b"], 100, 1000)
    segment.append(9, "pkg-b", ReqType.DELETE, ["/ü/x"], [], 7, 2000)
    first, second = segment.entry(0), segment.entry(1)
    assert (first.offset, first.package_id, first.action) == (5, "pkg-a", Action.ADD)
    assert first.paths == ("/a", "/b")
    assert first.deep_paths == ("/b",)
    assert (first.size, first.created_ms) == (100, 1000)
    assert second.paths == ("/ü/x",)
    assert second.deep_paths == ()
    assert second.action is Action.DELETE
    assert segment.index_after(4) == 0
    assert segment.index_after(5) == 1
    assert segment.index_after(9) == 2
    assert segment.index_of(9) == 1
    assert segment.index_of(6) is None


def test_separator_characters_from_other_writers_cannot_corrupt_entries() -> None:
    segment = EntrySegment()
    segment.append(1, "id\x1fx", ReqType.ADD, ["/a\x1e/b", "/c"], [], 0, 0)
    entry = segment.entry(0)
    assert entry.package_id == "id\ufffdx"
    assert entry.paths == ("/a\ufffd/b", "/c")


def test_entry_without_paths() -> None:
    segment = EntrySegment()
    segment.append(1, "id", ReqType.ADD, [], [], 0, 0)
    assert segment.entry(0).paths == ()


def test_offsets_must_ascend() -> None:
    segment = EntrySegment()
    segment.append(3, "a", ReqType.ADD, ["/a"], [], 0, 0)
    with pytest.raises(ValueError, match="not after"):
        segment.append(3, "b", ReqType.ADD, ["/a"], [], 0, 0)


def test_drop_before_and_extend() -> None:
    segment = EntrySegment()
    for offset in range(10):
        segment.append(offset, f"p{offset}", ReqType.ADD, [f"/{offset}"], [], offset, offset)
    tail = segment.drop_before(7)
    assert [tail.entry(i).package_id for i in range(len(tail))] == ["p7", "p8", "p9"]
    head = EntrySegment()
    head.append(100, "q", ReqType.ADD, ["/q"], [], 0, 0)
    tail.extend(head)
    assert tail.entry(3).package_id == "q"
    assert tail.entry(2).paths == ("/9",)
    with pytest.raises(ValueError, match="overlap"):
        tail.extend(segment)
