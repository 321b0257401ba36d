"""Which data files of a store table can hold a node version that some scopes cover: the fold
reads and rewrites those files (and the files of the scopes' own rows) only, so its cost follows
the paths it folds instead of the table's size.

A scope at ``s`` covers the node ``s`` and, when deep, the nodes below it. Such a node's path is
in a range (``s`` itself, or ``s`` up to ``s + "0"``: ``s + "/..."`` sorts before that), and its
parent too (``s``'s parent, or ``s`` and below). Delta keeps each file's least and greatest value
of both columns (truncated to ``spark.databricks.io.skipping.stringPrefixLength`` characters in a
way that keeps the range around the file's values), and a file can hold a covered node only if
both of its ranges meet the scopes'. Each test alone lets most files through, for different
reasons: every imported file also holds bookkeeping rows, whose keys ("0000...") sort after every
path and stretch its path range to the end; a file of a tree laid out by path holds a folder or
two, whose shallow parents stretch its parent range. Ranges are half-open, in Spark's string
order (Python's code point order). A file without statistics may hold anything.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from subscriber.store.rows import KIND_NODE

# The least string after every path below ``p``.
_BELOW_END = "0"
# The least string after ``p`` itself.
_SELF_END = "\x00"
_ROOT = "/"


@dataclass(frozen=True)
class Ranges:
    """Disjoint, sorted, half-open ranges [low, high) of strings; or all of them."""

    lows: tuple[str, ...] = ()
    highs: tuple[str, ...] = ()
    everything: bool = False

    def meet(self, least: str | None, greatest: str | None) -> bool:
        """Whether values from ``least`` to ``greatest`` (None: unknown) can be in a range."""
        if self.everything or least is None or greatest is None:
            return True
        # The first range that ends after ``least``; the ranges' ends ascend.
        i = bisect.bisect_right(self.highs, least)
        return i < len(self.lows) and self.lows[i] <= greatest


def _merged(spans: list[tuple[str, str]]) -> Ranges:
    lows: list[str] = []
    highs: list[str] = []
    for low, high in sorted(spans):
        if highs and low <= highs[-1]:
            highs[-1] = max(highs[-1], high)
        else:
            lows.append(low)
            highs.append(high)
    return Ranges(tuple(lows), tuple(highs))


@dataclass(frozen=True)
class Covered:
    """Where the nodes that some scopes cover are: their paths and their parents."""

    paths: Ranges
    parents: Ranges


def covered(scopes: Iterable[tuple[str, bool]]) -> Covered:
    """The ranges of the nodes that scopes ``(path, deep)`` cover."""
    paths: list[tuple[str, str]] = []
    parents: list[tuple[str, str]] = []
    root = False  # the root node has no parent: only its path tells where it is
    for path, deep in scopes:
        if path == _ROOT and deep:
            return Covered(Ranges(everything=True), Ranges(everything=True))
        root = root or path == _ROOT
        paths.append((path, path + _SELF_END))
        parent = path.rpartition("/")[0] or _ROOT
        parents.append((parent, parent + _SELF_END))
        if deep:
            paths.append((path + "/", path + _BELOW_END))
            parents.append((path, path + _BELOW_END))
    return Covered(_merged(paths), Ranges(everything=True) if root else _merged(parents))


@dataclass(frozen=True)
class FileRanges:
    """A data file's statistics (None: unknown): least and greatest kind, path and parent."""

    name: str
    kinds: tuple[str | None, str | None] = (None, None)
    paths: tuple[str | None, str | None] = (None, None)
    parents: tuple[str | None, str | None] = (None, None)

    def may_hold_nodes(self) -> bool:
        least, greatest = self.kinds
        return least is None or greatest is None or least <= KIND_NODE <= greatest


def files_meeting(files: Sequence[FileRanges], where: Covered) -> list[str]:
    """The names of the files that can hold a node in ``where``."""
    return [
        f.name
        for f in files
        if f.may_hold_nodes() and where.paths.meet(*f.paths) and where.parents.meet(*f.parents)
    ]
