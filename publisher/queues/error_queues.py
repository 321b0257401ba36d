"""Error queues: packages a subscriber gave up on, with the last error it reported.

Every subscriber has one. A subscriber sends a REMOVED_FAILED PackageStatusMessage with the
offset when it skips a package: after its retries (``max_retries >= 0``), or at once for a
permanent failure (a package it can never import), which a blocking subscriber
(``max_retries < 0``) reports too - so a blocking subscriber's error queue stays empty unless a
permanent failure happens. The status topic is read from the earliest record, so the error
queues survive a publisher restart. Each failed import attempt also sends a LogMessage; the
last one per (subscriber, offset) is kept as the item's error.

Bounded whatever the status topic holds: at most ``max_subscribers`` subscribers (the least
recently reported about are dropped), ``MAX_FAILED_PER_SUBSCRIBER`` failed offsets each (the
lowest dropped), and errors within a per-subscriber and a global count and text budget (the
oldest dropped). Drops are counted in ``scd_error_queues_dropped_total{kind}``.

Reports read from another region's copy of the status topic (docs/regions.md) name offsets of
that copy: one that carries the package's sequence number is placed at that package's offset on
the publisher's log (``locate``); a number not on the retained log is a bad record. One without
a number keeps the copy's offset.
"""

from __future__ import annotations

import logging
import threading
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from journal.api import Record
from journal.wire.messages import LogMessage, PackageStatusMessage, Status
from publisher.bad_records import check_count, check_enum, check_name, check_offset
from publisher.errors import BadRecord
from publisher.metrics import PublisherMetrics
from publisher.settings import DEFAULT_MAX_SUBSCRIBERS
from runtime.ratelog import RateLimitedLog

log = logging.getLogger(__name__)

# Errors kept per subscriber: enough for every item of a long error queue plus the current
# head, bounded so a subscriber failing all day cannot grow the publisher's memory.
MAX_ERRORS_PER_SUBSCRIBER = 1000
# Longest error text kept (message and stack trace each); the subscriber's log has the rest.
MAX_ERROR_CHARS = 4000
# Errors kept over all subscribers, and their text: a few tens of MiB at most, whatever
# ``max_subscribers`` is (1000 subscribers x 1000 errors x 8000 chars would be 8 GB).
MAX_ERRORS = 20_000
MAX_ERROR_TEXT_CHARS = 16 * 1024 * 1024
# Failed offsets kept per subscriber (8 bytes each): a subscriber that skipped more packages
# than this has a problem no longer list will explain; the lowest offsets go first.
MAX_FAILED_PER_SUBSCRIBER = 10_000
# The subscriber's LogMessage of a permanent failure starts with this: it was tried once.
PERMANENT_PREFIX = "permanent: "


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

    @property
    def chars(self) -> int:
        return len(self.message) + len(self.stacktrace)

    @property
    def permanent(self) -> bool:
        return self.message.startswith(PERMANENT_PREFIX)


@dataclass
class _Queue:
    failed: array[int] = field(default_factory=lambda: array("q"))
    # Oldest report first.
    errors: OrderedDict[int, ReportedError] = field(default_factory=OrderedDict)


class ErrorQueues:
    def __init__(
        self,
        agent_name: str,
        *,
        max_subscribers: int = DEFAULT_MAX_SUBSCRIBERS,
        metrics: PublisherMetrics | None = None,
        locate: Callable[[int], int | None] = lambda _number: None,
    ) -> None:
        self.agent_name = agent_name
        self.max_subscribers = max_subscribers
        # A package's offset on the publisher's topic by its sequence number (None: not on
        # the retained log): places failures read from another region's copy.
        self.locate = locate
        self.metrics = metrics
        self._lock = threading.Lock()
        # Least recently reported about first: the end a full map drops from.
        self._queues: OrderedDict[str, _Queue] = OrderedDict()
        # Every kept error by age, over all subscribers, for the global budget.
        self._ages: OrderedDict[tuple[str, int], None] = OrderedDict()
        self._error_chars = 0
        self._drop_log = RateLimitedLog(log)

    def handle_status(self, message: PackageStatusMessage, _record: Record) -> None:
        """A status read from the publisher's own status topic."""
        self._handle_status(message, remote=False)

    def handle_remote_status(self, message: PackageStatusMessage, _record: Record) -> None:
        """A status read from another region's copy: placed by its sequence number."""
        self._handle_status(message, remote=True)

    def handle_log(self, message: LogMessage, record: Record) -> None:
        self._handle_log(message, record, remote=False)

    def handle_remote_log(self, message: LogMessage, record: Record) -> None:
        self._handle_log(message, record, remote=True)

    def _offset(self, offset: int, sequence: int, remote: bool) -> int:
        """The reported package's offset on the publisher's topic: as reported, or for a
        report from another region's copy, where its sequence number is (offsets there are
        the copy's; a report without a number keeps the copy's offset, docs/regions.md)."""
        offset = check_offset(offset, "offset")
        number = check_count(sequence, "sequence")
        if not remote or number == 0:
            return offset
        located = self.locate(number)
        if located is None:
            raise BadRecord(
                f"sequence {number} of {self.agent_name} is not on the publisher's retained "
                "log (never sent, or deleted by retention)"
            )
        return located

    def _handle_status(self, message: PackageStatusMessage, *, remote: bool) -> None:
        if message.pub_agent_name != self.agent_name:
            return
        status = check_enum(Status, message.status, "status")
        if status != Status.REMOVED_FAILED:
            return
        name = queue_name(
            check_name(message.sub_sling_id, "sub_sling_id"),
            check_name(message.sub_agent_name, "sub_agent_name"),
        )
        offset = self._offset(message.offset, message.sequence, remote)
        dropped: dict[str, int] = {}
        with self._lock:
            offsets = self._queue(name, dropped).failed
            i = bisect_left(offsets, offset)
            if i == len(offsets) or offsets[i] != offset:
                offsets.insert(i, offset)
                if len(offsets) > MAX_FAILED_PER_SUBSCRIBER:
                    del offsets[0]
                    dropped["failed_offset"] = 1
        self._report(dropped)

    def _handle_log(self, message: LogMessage, record: Record, *, remote: bool) -> None:
        if message.pub_agent_name and message.pub_agent_name != self.agent_name:
            return
        name = queue_name(
            check_name(message.sub_sling_id, "sub_sling_id"),
            check_name(message.sub_agent_name, "sub_agent_name"),
        )
        offset = self._offset(message.offset, message.sequence, remote)
        error = ReportedError(
            offset=offset,
            package_id=check_name(message.pkg_id, "pkg_id") if message.pkg_id else "",
            message=message.message[:MAX_ERROR_CHARS],
            stacktrace=message.stacktrace[:MAX_ERROR_CHARS],
            reported_ms=record.timestamp_ms,
        )
        dropped: dict[str, int] = {}
        with self._lock:
            errors = self._queue(name, dropped).errors
            self._forget_error(name, errors, offset)
            errors[offset] = error
            self._ages[(name, offset)] = None
            self._error_chars += error.chars
            while len(errors) > MAX_ERRORS_PER_SUBSCRIBER:
                self._forget_error(name, errors, next(iter(errors)))
                dropped["error"] = dropped.get("error", 0) + 1
            while len(self._ages) > MAX_ERRORS or self._error_chars > MAX_ERROR_TEXT_CHARS:
                oldest, oldest_offset = next(iter(self._ages))
                self._forget_error(oldest, self._queues[oldest].errors, oldest_offset)
                dropped["error"] = dropped.get("error", 0) + 1
        self._report(dropped)

    def _queue(self, name: str, dropped: dict[str, int]) -> _Queue:
        """The subscriber's state, now the most recently reported about (under the lock)."""
        queue = self._queues.get(name)
        if queue is not None:
            self._queues.move_to_end(name)
            return queue
        queue = self._queues[name] = _Queue()
        while len(self._queues) > self.max_subscribers:
            gone, state = self._queues.popitem(last=False)
            for offset in list(state.errors):
                self._forget_error(gone, state.errors, offset)
            dropped["subscriber"] = dropped.get("subscriber", 0) + 1
        return queue

    def _forget_error(
        self, name: str, errors: OrderedDict[int, ReportedError], offset: int
    ) -> None:
        error = errors.pop(offset, None)
        if error is not None:
            self._error_chars -= error.chars
            del self._ages[(name, offset)]

    def _report(self, dropped: dict[str, int]) -> None:
        if not dropped:
            return
        for kind, count in dropped.items():
            if self.metrics is not None:
                self.metrics.error_queues_dropped.labels(kind).inc(count)
        self._drop_log.log(
            logging.WARNING,
            "error queues at their bounds (%d subscribers, %d failed offsets each, %d errors): "
            "dropped the oldest %s",
            self.max_subscribers,
            MAX_FAILED_PER_SUBSCRIBER,
            MAX_ERRORS,
            ", ".join(f"{count} {kind}" for kind, count in sorted(dropped.items())),
        )

    def tracked(self) -> int:
        """Subscribers with error queue state."""
        with self._lock:
            return len(self._queues)

    def size(self, name: str) -> int:
        with self._lock:
            queue = self._queues.get(name)
            return len(queue.failed) if queue is not None else 0

    def offsets(self, name: str, skip: int = 0, limit: int | None = None) -> list[int]:
        with self._lock:
            queue = self._queues.get(name)
            if queue is None:
                return []
            end = len(queue.failed) if limit is None else skip + limit
            return list(queue.failed[skip:end])

    def last_error(self, name: str, offset: int) -> ReportedError | None:
        with self._lock:
            queue = self._queues.get(name)
            return queue.errors.get(offset) if queue is not None else None
