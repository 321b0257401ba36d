"""Clear of the aggregated editable queue (publisher/queues/views.py): the cleared items are
counted from the lowest processed offset among the editable subscribers, and every editable
subscriber is then cleared up to the last of them, each with its own ClearCommand
(publisher/clear.py): one behind gets the items it still holds removed, one already past them
gets no command. The read-only aggregated queue is never cleared (409)."""

from __future__ import annotations

from publisher.clear import Clearer, ClearMode, ClearResult, check_clear, clear_limit
from publisher.errors import NotEditable
from publisher.queues.views import EDITABLE_QUEUE


def clear_aggregated(
    clearer: Clearer, name: str, mode: ClearMode, count: int | None, offset: int | None
) -> ClearResult:
    if name != EDITABLE_QUEUE:
        raise NotEditable(f"the aggregated queue {name!r} is read-only: clear {EDITABLE_QUEUE!r}")
    check_clear(mode, count, offset)
    queues = clearer.queues
    summary = queues.summary(name)
    processed = summary.processed_offset
    if mode is ClearMode.UP_TO:
        assert offset is not None
        last = offset
    else:
        if processed is None or summary.size == 0:
            return ClearResult(name, 0, None, None)
        limit = clear_limit(mode, count, summary.size)
        upto = queues.cache.last_offset_upto(processed, limit)
        if upto is None:
            return ClearResult(name, 0, None, None)
        last = upto
    if processed is None:
        return ClearResult(name, 0, None, None)
    removed = summary.size - queues.cache.count_after(max(last, processed))
    results = [clearer.clear(s.queue_name, ClearMode.UP_TO, offset=last) for s in summary.members]
    commands = [r.command_offset for r in results if r.command_offset is not None]
    cleared = [r.clear_offset for r in results if r.clear_offset is not None]
    return ClearResult(
        name, removed, max(cleared) if cleared else None, max(commands) if commands else None
    )
