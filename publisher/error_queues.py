"""Error queues: packages a subscriber gave up on, with the last error it reported.

A subscriber with ``max_retries >= 0`` skips a package after its retries and sends a
REMOVED_FAILED PackageStatusMessage with the offset; the status topic is read from the
earliest record, so the error queues survive a publisher restart. Each failed import attempt
also sends a LogMessage; the last one per (subscriber, offset) is kept as the item's error.
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left, insort
from collections import OrderedDict
from dataclasses import dataclass

from journal.api import Record
from journal.wire.messages import LogMessage, PackageStatusMessage, Status

# Errors kept per subscriber: enough for every item of a long error queue plus the current
# head, bounded so a subscriber failing all day cannot grow the publisher's memory.
MAX_ERRORS_PER_SUBSCRIBER = 1000
# Longest error text kept (message and stack trace each); the subscriber's log has the rest.
MAX_ERROR_CHARS = 4000


def queue_name(sub_sling_id: str, sub_agent_name: str) -> str:
    return f"{sub_sling_id}-{sub_agent_name}"


@dataclass(frozen=True)
class ReportedError:
    """The last failure a subscriber reported for one package."""

    offset: int
    package_id: str
    message: str
    stacktrace: str
    reported_ms: int


class ErrorQueues:
    def __init__(self, agent_name: str) -> None:
        self.agent_name = agent_name
        self._lock = threading.Lock()
        self._failed: dict[str, array[int]] = {}
        self._errors: dict[str, OrderedDict[int, ReportedError]] = {}

    def handle_status(self, message: PackageStatusMessage, record: Record) -> None:
        if message.pub_agent_name != self.agent_name or message.status != Status.REMOVED_FAILED:
            return
        name = queue_name(message.sub_sling_id, message.sub_agent_name)
        with self._lock:
            offsets = self._failed.setdefault(name, array("q"))
            i = bisect_left(offsets, message.offset)
            if i == len(offsets) or offsets[i] != message.offset:
                insort(offsets, message.offset)

    def handle_log(self, message: LogMessage, record: Record) -> None:
        if message.pub_agent_name and message.pub_agent_name != self.agent_name:
            return
        name = queue_name(message.sub_sling_id, message.sub_agent_name)
        error = ReportedError(
            offset=message.offset,
            package_id=message.pkg_id,
            message=message.message[:MAX_ERROR_CHARS],
            stacktrace=message.stacktrace[:MAX_ERROR_CHARS],
            reported_ms=record.timestamp_ms,
        )
        with self._lock:
            errors = self._errors.setdefault(name, OrderedDict())
            errors[message.offset] = error
            errors.move_to_end(message.offset)
            while len(errors) > MAX_ERRORS_PER_SUBSCRIBER:
                errors.popitem(last=False)

    def size(self, name: str) -> int:
        with self._lock:
            return len(self._failed.get(name, ()))

    def offsets(self, name: str, skip: int = 0, limit: int | None = None) -> list[int]:
        with self._lock:
            failed = self._failed.get(name, array("q"))
            end = len(failed) if limit is None else skip + limit
            return list(failed[skip:end])

    def last_error(self, name: str, offset: int) -> ReportedError | None:
        with self._lock:
            errors = self._errors.get(name)
            return errors.get(offset) if errors else None
