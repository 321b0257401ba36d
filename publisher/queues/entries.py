"""Compact storage of cached package entries: parallel arrays, no object per entry.

A segment holds entries of ascending offset in ``array`` columns (offset, created time, size,
request type, end of the entry's text) and one ``bytearray`` of UTF-8 text: the package id and
the paths of every entry, separated by control characters that valid paths never contain.
That costs about 33 bytes plus the text per entry (Sling documents ~100 B per entry), instead
of the ~1 KB a Python object with a list of strings would take. An :class:`Entry` object is
only built when an item is actually shown.

Sequence numbers (journal/sequence.py) are indexed apart: ``_numbers`` holds the strictly
growing numbers of the segment and ``_numbered`` the index of the entry carrying each. An entry
numbered at or below a number already indexed (a copy appended to the log: subscribers skip it
as a replay) or not numbered is not indexed, so the lookup is a bisect whatever the log holds.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from publisher.distribute.request import Action

# Separators inside an entry's text. Paths are validated to hold no control characters; text
# from other writers has these replaced (see _clean) so they can never be confused.
_FIELD = "\x1f"  # package id | paths
_PATH = "\x1e"  # between paths
_DEEP = "\x1d"  # prefix of a deep path
_CONTROL = str.maketrans({_FIELD: "\ufffd", _PATH: "\ufffd", _DEEP: "\ufffd"})


def _clean(text: str) -> str:
    # isprintable() is a fast C scan; only text with control characters needs translating.
    return text if text.isprintable() else text.translate(_CONTROL)


@dataclass(frozen=True, slots=True)
class Entry:
    """One package on the package topic, as queue items show it."""

    offset: int
    package_id: str
    action: Action
    paths: tuple[str, ...]
    deep_paths: tuple[str, ...]
    size: int
    created_ms: int


class EntrySegment:
    """Entries of a contiguous offset range, in ascending offset order."""

    __slots__ = (
        "_created",
        "_ends",
        "_kinds",
        "_numbered",
        "_numbers",
        "_offsets",
        "_sizes",
        "_text",
    )

    def __init__(self) -> None:
        self._offsets = array("q")
        self._created = array("q")
        self._sizes = array("q")
        self._kinds = array("b")
        self._ends = array("q")
        self._text = bytearray()
        self._numbers = array("q")
        self._numbered = array("q")

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def first_offset(self) -> int:
        return self._offsets[0]

    @property
    def last_offset(self) -> int:
        return self._offsets[-1]

    def append(
        self,
        offset: int,
        package_id: str,
        req_type: int,
        paths: Sequence[str],
        deep_paths: Sequence[str],
        size: int,
        created_ms: int,
        sequence: int = 0,
    ) -> None:
        if self._offsets and offset <= self._offsets[-1]:
            raise ValueError(f"offset {offset} not after {self._offsets[-1]}")
        deep = set(deep_paths)
        parts = [_DEEP + _clean(p) if p in deep else _clean(p) for p in paths]
        listed = set(paths)
        parts.extend(_DEEP + _clean(p) for p in deep_paths if p not in listed)
        text = (_clean(package_id) + _FIELD + _PATH.join(parts)).encode("utf-8", "replace")
        # The one column that can refuse a value (a request type beyond a signed byte) goes
        # first: a refused entry leaves the columns as they were, never of unequal lengths.
        self._kinds.append(req_type)
        self._text += text
        self._ends.append(len(self._text))
        self._offsets.append(offset)
        self._created.append(created_ms)
        self._sizes.append(size)
        if sequence > 0 and (not self._numbers or sequence > self._numbers[-1]):
            self._numbers.append(sequence)
            self._numbered.append(len(self._offsets) - 1)

    def index_after(self, offset: int) -> int:
        """Index of the first entry with an offset greater than ``offset``."""
        return bisect_right(self._offsets, offset)

    def index_of(self, offset: int) -> int | None:
        i = bisect_left(self._offsets, offset)
        return i if i < len(self._offsets) and self._offsets[i] == offset else None

    @property
    def numbers(self) -> tuple[int, int] | None:
        """(lowest, highest) sequence number indexed, None when none is."""
        return (self._numbers[0], self._numbers[-1]) if self._numbers else None

    def offset_upto_number(self, number: int) -> int | None:
        """Offset of the entry with the highest indexed number <= ``number`` (None: none)."""
        i = bisect_right(self._numbers, number)
        return self._offsets[self._numbered[i - 1]] if i else None

    def offset_of_number(self, number: int) -> int | None:
        """Offset of the entry numbered exactly ``number`` (None: not indexed here)."""
        i = bisect_left(self._numbers, number)
        if i < len(self._numbers) and self._numbers[i] == number:
            return self._offsets[self._numbered[i]]
        return None

    def numbered_between(self, start: int, end: int) -> int:
        """How many entries with an index in [start, end) carry an indexed number."""
        return bisect_left(self._numbered, end) - bisect_left(self._numbered, start)

    def number_upto_offset(self, offset: int) -> int | None:
        """The highest number indexed at an offset <= ``offset`` (None: none here)."""
        i = bisect_left(self._numbered, bisect_right(self._offsets, offset))
        return self._numbers[i - 1] if i else None

    def offset_at(self, index: int) -> int:
        return self._offsets[index]

    def created_at(self, index: int) -> int:
        return self._created[index]

    def entry(self, index: int) -> Entry:
        start = self._ends[index - 1] if index else 0
        text = self._text[start : self._ends[index]].decode("utf-8")
        package_id, _, joined = text.partition(_FIELD)
        paths: list[str] = []
        deep: list[str] = []
        for part in joined.split(_PATH) if joined else ():
            if part.startswith(_DEEP):
                part = part[1:]
                deep.append(part)
            paths.append(part)
        return Entry(
            offset=self._offsets[index],
            package_id=package_id,
            action=Action.from_req_type(self._kinds[index]),
            paths=tuple(paths),
            deep_paths=tuple(deep),
            size=self._sizes[index],
            created_ms=self._created[index],
        )

    def drop_before(self, offset: int) -> EntrySegment:
        """A new segment without the entries of offset < ``offset``."""
        cut = bisect_left(self._offsets, offset)
        if cut == 0:
            return self
        out = EntrySegment()
        base = self._ends[cut - 1]
        out._offsets = self._offsets[cut:]
        out._created = self._created[cut:]
        out._sizes = self._sizes[cut:]
        out._kinds = self._kinds[cut:]
        out._ends = array("q", (end - base for end in self._ends[cut:]))
        out._text = self._text[base:]
        first = bisect_left(self._numbered, cut)
        out._numbers = self._numbers[first:]
        out._numbered = array("q", (i - cut for i in self._numbered[first:]))
        return out

    def extend(self, other: EntrySegment) -> None:
        """Append every entry of ``other`` (all of whose offsets are greater)."""
        if not len(other):
            return
        if self._offsets and other.first_offset <= self._offsets[-1]:
            raise ValueError("segments overlap")
        base = len(self._text)
        count = len(self._offsets)
        # Numbers stay strictly growing across the join: ``other``'s at or below ours are
        # copies (see the module doc) and are not indexed.
        top = self._numbers[-1] if self._numbers else 0
        for number, index in zip(other._numbers, other._numbered, strict=True):
            if number > top:
                self._numbers.append(number)
                self._numbered.append(index + count)
                top = number
        self._offsets.extend(other._offsets)
        self._created.extend(other._created)
        self._sizes.extend(other._sizes)
        self._kinds.extend(other._kinds)
        self._ends.extend(end + base for end in other._ends)
        self._text += other._text
