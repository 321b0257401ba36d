"""Distributed events: one PackageDistributedMessage per package every alive subscriber has
processed. Leader only.

When the minimum processed offset of the alive subscribers rises from ``a`` to ``b``, one event
per cached package in ``(a, b]`` goes to the event topic, as JSON, keyed by the publisher agent
name: all of an agent's events land in one partition, where the idempotent producer keeps them
in order. So the last event in that partition is the last one actually written, and everything
before it was written too. A new leader reads it back and resumes right after it: no event is
sent twice and none is skipped, whichever instance crashed when.

The first leader of an agent starts after the subscribers' position at that moment and records
that start point on the event topic (a ``DistributedEventsStart`` record, same key and
partition) before any event: a leader that takes over before the first event was sent resumes
from it instead of from the subscribers' later position, which would skip the packages
processed in between.

Writes go through a fenced writer (``Journal.fenced_writer``, one fence id per agent and event
topic; on Kafka a transactional producer), opened before the read-back: opening it fences any
earlier leader, and a batch of events lands whole or not at all. So an old leader that still
believes it leads (cut off from the group coordinator, say) can no longer write, and the new
one reads back everything the old one completed: no event twice, none skipped, even while two
instances both try to send.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from journal.api import FencedWriter, Journal, OutgoingRecord, Position
from journal.errors import Fenced, JournalError
from journal.failure_events import is_failure_event
from journal.wire.headers import TYPE_HEADER
from journal.wire.sling_json import event_fields, event_record
from publisher.bad_records import BadRecords, check_offset
from publisher.discovery import DiscoveryView
from publisher.errors import BadRecord
from publisher.metrics import PublisherMetrics
from publisher.queues.cache import QueueCache
from publisher.queues.entries import Entry
from publisher.queues.positions import processed_offset

log = logging.getLogger(__name__)

EVENT_TYPE = "PackageDistributedMessage"
# Type header of the start point record; consumers of events skip it by its type header (or by
# its JSON, which has no packageId).
START_TYPE = "DistributedEventsStart"
# Records read back per partition in the first pass when looking for the last event; a
# partition holding other agents' events is scanned further back, window by window (x4).
READBACK_WINDOW = 1000
# Poll timeout while reading events back.
READBACK_POLL_S = 0.5
# A read-back gives up on a partition after this many empty polls in a row (records deleted
# by retention while it read): 10 x 0.5 s is far beyond a healthy broker's fetch latency.
READBACK_MAX_EMPTY_POLLS = 10
# Events sent per flush: bounds how much one tick sends before checking the outcome.
EVENT_BATCH = 1000


def distributed_event(headers: Mapping[str, str], value: bytes) -> dict[str, Any] | None:
    """The event of a record of the event topic; None for a start point record."""
    if headers.get(TYPE_HEADER) != EVENT_TYPE:
        return None
    event: dict[str, Any] = event_fields(headers, value)
    return event


def start_point(agent_name: str, instance_id: str, start_after: int) -> dict[str, Any]:
    return {"pubAgentName": agent_name, "startAfter": start_after, "application": instance_id}


def distributed_message(agent_name: str, instance_id: str, entry: Entry) -> dict[str, Any]:
    """Sling's PackageDistributedMessage, and the instance that sent it (on a sling-json
    journal, in a header: journal/wire/sling_json.py)."""
    return {
        "pubAgentName": agent_name,
        "packageId": entry.package_id,
        "offset": entry.offset,
        "paths": list(entry.paths),
        "deepPaths": list(entry.deep_paths),
        "application": instance_id,
    }


class DistributedEvents:
    def __init__(
        self,
        journal: Journal,
        topic: str,
        cache: QueueCache,
        discovery: DiscoveryView,
        *,
        agent_name: str,
        instance_id: str,
        metrics: PublisherMetrics,
    ) -> None:
        self.journal = journal
        self.topic = topic
        self.cache = cache
        self.discovery = discovery
        self.agent_name = agent_name
        self.instance_id = instance_id
        self.metrics = metrics
        self.last_offset: int | None = None
        # Open once the position was read back; None until then (and after reset()).
        self._writer: FencedWriter | None = None
        self.fence_id = f"scd-events.{topic}.{agent_name}"
        self.bad_records = BadRecords(metrics.bad_records, log)

    def reset(self) -> None:
        """Forget the position and let the writer go (leadership lost, or a write failed):
        the next tick opens a new writer and reads the position back."""
        self.last_offset = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _record(self, fields: dict[str, Any], type_name: str) -> OutgoingRecord:
        value, headers = event_record(type_name, fields)
        return OutgoingRecord(value, self.agent_name.encode(), headers)

    def min_processed_offset(self) -> int | None:
        # In this log's offsets, remote subscribers' included: events go once per package,
        # when every subscriber of every region processed it.
        offsets = [
            offset
            for s in self.discovery.alive()
            if (offset := processed_offset(s, self.agent_name, self.cache)) is not None
        ]
        return min(offsets) if offsets else None

    def tick(self) -> int:
        """Send the events due; returns how many were sent."""
        try:
            return self._tick()
        except Fenced:
            self.metrics.events_fenced.inc()
            log.warning(
                "distributed events of %s: another instance took over; reading back again",
                self.agent_name,
            )
            self.reset()
            raise
        except JournalError:
            # A batch whose commit timed out may still land: read back the truth before
            # sending again.
            self.reset()
            raise

    def _tick(self) -> int:
        writer = self._writer
        if writer is None:
            # Opened before the read-back: earlier writers are fenced, their last batch
            # settled, so what is read back is final.
            writer = self.journal.fenced_writer(self.fence_id)
            try:
                self.last_offset = self.read_back()
            except BaseException:
                writer.close()
                raise
            self._writer = writer
            log.info("distributed events resume after offset %s", self.last_offset)
        low = self.min_processed_offset()
        if low is None:
            return 0
        if self.last_offset is None:
            # No event was ever sent: start from the subscribers' current position, recorded
            # first so that a next leader starts from the same point. Never beyond the log's
            # end: an offset announced past it is forged, and would hold events back forever.
            low = min(low, self.journal.latest_offset(self.cache.topic) - 1)
            point = start_point(self.agent_name, self.instance_id, low)
            writer.write(self.topic, [self._record(point, START_TYPE)])
            self.last_offset = low
            log.info("distributed events start after offset %d", low)
            return 0
        # A subscriber can be ahead of this instance's cache (it reads the package topic
        # itself): events go only up to what the cache has read, the rest on a later tick.
        # Sending up to ``low`` would mark packages the cache has not seen yet as done.
        low = min(low, self.cache.next_offset - 1)
        if low <= self.last_offset:
            return 0
        self.cache.ensure(self.last_offset + 1)
        entries = self.cache.entries_between(self.last_offset, low)
        sent = 0
        try:
            for start in range(0, len(entries), EVENT_BATCH):
                batch = entries[start : start + EVENT_BATCH]
                events = [distributed_message(self.agent_name, self.instance_id, e) for e in batch]
                writer.write(self.topic, [self._record(e, EVENT_TYPE) for e in events])
                sent += len(batch)
                self.last_offset = batch[-1].offset
        finally:
            self.metrics.distributed_events.inc(sent)
        self.last_offset = low
        if sent:
            log.info("sent %d distributed events up to offset %d", sent, low)
        return sent

    def read_back(self) -> int | None:
        """Offset of the last event of this agent on the event topic (or of its start point),
        None if there is neither."""
        best: int | None = None
        # An event is for a package on the log: an offset at or beyond its end is forged, and
        # believing it would stop events until the log got there.
        log_end = self.journal.latest_offset(self.cache.topic)
        for partition in range(self.journal.partitions(self.topic)):
            found = self._last_in_partition(partition, log_end)
            if found is not None and (best is None or found > best):
                best = found
        return best

    def _last_in_partition(self, partition: int, log_end: int) -> int | None:
        earliest = self.journal.earliest_offset(self.topic, partition)
        end = self.journal.latest_offset(self.topic, partition)
        window = READBACK_WINDOW
        while end > earliest:
            start = max(earliest, end - window)
            found = self._scan(partition, start, end, log_end)
            if found is not None:
                return found
            end, window = start, window * 4
        return None

    def _scan(self, partition: int, start: int, end: int, log_end: int) -> int | None:
        best: int | None = None
        empty = 0
        with self.journal.consumer(self.topic, Position.at(start), [partition]) as consumer:
            while consumer.positions().get(partition, start) < end:
                records = consumer.poll(READBACK_POLL_S)
                empty = 0 if records else empty + 1
                if empty >= READBACK_MAX_EMPTY_POLLS:
                    log.warning("event topic partition %d: read-back stopped early", partition)
                    break
                for record in records:
                    if record.offset >= end:
                        break
                    if is_failure_event(record.headers):
                        continue  # the subscribers' (journal/failure_events.py), not ours
                    try:
                        offset = _event_offset(record.value, self.agent_name, log_end)
                    except BadRecord as exc:
                        self.bad_records.report(record, exc)
                        continue
                    if offset is not None and (best is None or offset > best):
                        best = offset
        return best


def _event_offset(value: bytes, agent_name: str, log_end: int) -> int | None:
    """The package offset an event or start point record of ``agent_name`` stands for (None
    for another agent's); BadRecord if it is neither an event nor a start point."""
    try:
        event = json.loads(value)
    except (ValueError, RecursionError) as exc:  # RecursionError: "[[[[..." nested too deep
        raise BadRecord(f"not JSON: {type(exc).__name__}") from None
    if not isinstance(event, dict):
        raise BadRecord(f"a JSON {type(event).__name__}, not an event object")
    if event.get("pubAgentName") != agent_name:
        return None
    start = "startAfter" in event
    offset = event.get("startAfter" if start else "offset")
    # bool is an int subclass; a float or string offset was never written by a publisher.
    if type(offset) is not int:
        raise BadRecord(f"{'startAfter' if start else 'offset'} is not an integer")
    # A start point may be -1: the subscribers had processed nothing yet.
    check_offset(offset, "startAfter" if start else "offset", minimum=-1 if start else 0)
    if offset >= log_end:
        raise BadRecord(f"offset {offset} is beyond the package log's end ({log_end})")
    return offset
