"""The latest distributed events and failure events of one publisher agent, read back from the
event topic.

Any publisher instance can answer (only the leader sends events, but every instance reads the
topic), and what is shown is what consumers of the topic actually received. The topic is read
again only when one of its partitions grew, so a console polling every second costs one
``latest_offset`` per partition while nothing happens. Failure events are written by the
subscribers (journal/failure_events.py): each is checked whole, a bad one is skipped and
counted as a bad record of the topic.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from journal import failure_events
from journal.api import Journal, Position, Record
from journal.errors import JournalError
from journal.failure_events import FailureEvent
from publisher.bad_records import BadRecords
from publisher.distributed_events import distributed_event
from publisher.errors import BadRecord
from runtime.errors import DecodeError

log = logging.getLogger(__name__)

# Records read back per partition: the page shows a few dozen events at most; a partition
# shared with other agents' events may yield fewer of this agent's.
READ_WINDOW = 200
# A read-back gives up after this long (a broker that answers slowly); what it read is shown
# and the next request reads again.
READ_TIMEOUT_S = 2.0
READ_POLL_S = 0.2


@dataclass(frozen=True)
class SeenEvent:
    """One PackageDistributedMessage as found on the event topic."""

    offset: int
    package_id: str
    paths: tuple[str, ...]
    deep_paths: tuple[str, ...]
    application: str
    sent_ms: int
    partition: int
    record_offset: int


@dataclass(frozen=True)
class SeenFailure:
    """One failure event about this agent's packages as found on the event topic."""

    event: FailureEvent
    sent_ms: int


class RecentEvents:
    def __init__(
        self, journal: Journal, topic: str, agent_name: str, bad_records: BadRecords
    ) -> None:
        self.journal = journal
        self.topic = topic
        self.agent_name = agent_name
        self.bad_records = bad_records
        # One read at a time: concurrent consoles share its result instead of each reading.
        self._lock = threading.Lock()
        self._ends: tuple[int, ...] | None = None
        self._events: list[SeenEvent] = []
        self._failures: list[SeenFailure] = []
        # Per partition, the record offset below which bad records were counted already: each
        # read goes over the window again, a bad record is counted once.
        self._counted: dict[int, int] = {}

    def latest(self, limit: int) -> tuple[list[SeenEvent], str | None]:
        """This agent's last ``limit`` events, newest first, and why a fresh read failed (the
        events read last time are returned then: a console keeps showing what it knew)."""
        with self._lock:
            try:
                self._refresh()
            except JournalError as exc:
                return self._events[:limit], str(exc)
            return self._events[:limit], None

    def latest_failures(self, limit: int) -> list[SeenFailure]:
        """The last ``limit`` failure events about this agent's packages, newest first, as of
        the last read (``latest`` reads)."""
        with self._lock:
            return self._failures[:limit]

    def _refresh(self) -> None:
        partitions = self.journal.partitions(self.topic)
        ends = tuple(self.journal.latest_offset(self.topic, p) for p in range(partitions))
        if ends != self._ends:
            events, failures, complete = self._read(ends)
            self._events = events
            self._failures = failures
            # An incomplete read is shown but read again on the next request.
            self._ends = ends if complete else None

    def _read(self, ends: tuple[int, ...]) -> tuple[list[SeenEvent], list[SeenFailure], bool]:
        found: list[SeenEvent] = []
        failures: list[SeenFailure] = []
        if not any(ends):
            return found, failures, True
        deadline = time.monotonic() + READ_TIMEOUT_S
        complete = False
        with self.journal.consumer(self.topic, Position.latest(-READ_WINDOW)) as consumer:
            while time.monotonic() < deadline:
                for record in consumer.poll(READ_POLL_S):
                    if record.offset >= ends[record.partition]:
                        continue
                    if failure_events.is_failure_event(record.headers):
                        failure = self._failure(record)
                        if failure is not None:
                            failures.append(failure)
                    else:
                        event = self._event(record)
                        if event is not None:
                            found.append(event)
                positions = consumer.positions()
                if all(positions.get(p, 0) >= end for p, end in enumerate(ends)):
                    complete = True
                    break
        if not complete:
            log.warning(
                "console: read-back of %s incomplete after %.0f s", self.topic, READ_TIMEOUT_S
            )
        found.sort(key=lambda e: (e.offset, e.sent_ms), reverse=True)
        failures.sort(key=lambda f: f.sent_ms, reverse=True)
        return found, failures, complete

    def _failure(self, record: Record) -> SeenFailure | None:
        try:
            event = failure_events.parse(record.value)
        except DecodeError as exc:
            if record.offset >= self._counted.get(record.partition, 0):
                self._counted[record.partition] = record.offset + 1
                self.bad_records.report(record, BadRecord(str(exc)))
            return None
        if event.pub_agent_name != self.agent_name:
            return None
        return SeenFailure(event, record.timestamp_ms)

    def _event(self, record: Record) -> SeenEvent | None:
        try:
            event = distributed_event(record.headers, record.value)
            if event is None or event.get("pubAgentName") != self.agent_name:
                return None
            return SeenEvent(
                offset=int(event["offset"]),
                package_id=str(event.get("packageId", "")),
                paths=tuple(str(p) for p in event.get("paths", ())),
                deep_paths=tuple(str(p) for p in event.get("deepPaths", ())),
                application=str(event.get("application", "")),
                sent_ms=record.timestamp_ms,
                partition=record.partition,
                record_offset=record.offset,
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None  # not an event of ours; the events notifier logs such records
