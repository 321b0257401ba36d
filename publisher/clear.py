"""Clear: an editable subscriber's queue is cleared up to an offset by a ClearCommand.

Sling's clear operations, each turned into one ClearCommand carrying the offset of the last
item removed: the head item, the first N items (all of them when N is omitted), or every item
up to an offset. The command also carries that package's sequence number (the highest one up
to that offset, journal/sequence.py), which an scd subscriber obeys instead of the offset: a
subscriber reading another region's mirror (docs/regions.md) has other offsets, the same
numbers. A clear that removes a package nobody numbered (a foreign writer's) carries no number
and is obeyed by offset: that package has no other name. The subscriber skips the packages up
to there with REMOVED status, even one it is retrying, and keeps the largest clear it was ever
sent. Non-editable subscribers refuse clears, so they are refused here already (409).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

from journal.wire.messages import ClearCommand, CommandMessage
from publisher.commands import CommandSender
from publisher.errors import InvalidRequest, NotEditable
from publisher.queues.views import Queues

log = logging.getLogger(__name__)


class ClearMode(StrEnum):
    HEAD = "head"
    FIRST = "first"
    UP_TO = "upTo"
    ALL = "all"


@dataclass(frozen=True)
class ClearResult:
    queue: str
    removed: int
    clear_offset: int | None
    command_offset: int | None


def check_clear(mode: ClearMode, count: int | None, offset: int | None) -> None:
    """Raises InvalidRequest unless count and offset fit the mode (every clear checks here)."""
    if mode is ClearMode.FIRST and count is not None and count < 1:
        raise InvalidRequest("clear mode 'first' takes a count >= 1 (none: every item)")
    if mode is ClearMode.UP_TO and (offset is None or offset < 0):
        raise InvalidRequest("clear mode 'upTo' needs an offset >= 0")
    if mode in (ClearMode.HEAD, ClearMode.ALL) and (count is not None or offset is not None):
        raise InvalidRequest(f"clear mode {mode.value!r} takes neither count nor offset")
    if mode is ClearMode.FIRST and offset is not None:
        raise InvalidRequest("clear mode 'first' takes a count, not an offset")
    if mode is ClearMode.UP_TO and count is not None:
        raise InvalidRequest("clear mode 'upTo' takes an offset, not a count")


def clear_limit(mode: ClearMode, count: int | None, size: int) -> int:
    """How many items a head, first or all clear removes from a queue of ``size`` items."""
    if mode is ClearMode.HEAD:
        return 1
    if mode is ClearMode.FIRST and count is not None:
        return count
    return size


class Clearer:
    def __init__(self, commands: CommandSender, queues: Queues) -> None:
        self.commands = commands
        self.queues = queues

    def clear(
        self, name: str, mode: ClearMode, count: int | None = None, offset: int | None = None
    ) -> ClearResult:
        subscriber = self.queues.subscriber(name)
        if not subscriber.editable:
            raise NotEditable(f"subscriber {name!r} is not editable: its queue cannot be cleared")
        check_clear(mode, count, offset)
        summary = self.queues.summary(name)
        processed = summary.processed_offset
        if processed is None or summary.size == 0:
            return ClearResult(name, 0, None, None)
        cache = self.queues.cache
        if mode is ClearMode.UP_TO:
            assert offset is not None
            removed = summary.size - cache.count_after(max(offset, processed))
            last = cache.last_offset_upto(processed, removed) if removed else None
        else:
            removed = min(clear_limit(mode, count, summary.size), summary.size)
            last = cache.last_offset_upto(processed, removed)
        if last is None:
            return ClearResult(name, 0, None, None)
        clear = ClearCommand(offset=last, sequence=cache.clear_number(processed, last))
        command_offset = self.commands.send(subscriber, CommandMessage(clear_command=clear))
        log.info(
            "clear of %s: %d items up to offset %d, sequence %d (command at offset %d)",
            name,
            removed,
            last,
            clear.sequence,
            command_offset,
        )
        return ClearResult(name, removed, last, command_offset)
