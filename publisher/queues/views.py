"""Per-subscriber queues: views of the queue cache after each subscriber's processed offset.

A queue holds the cached packages with offset > the subscriber's last processed offset for this
publisher agent, in offset order: the offset it announced, or for a subscriber on another
region's copy of the log the offset its sequence number maps to (publisher/queues/positions.py).
State (Sling's): IDLE when empty, BLOCKED when the head item
failed ``blocked_after_attempts`` times or more, PAUSED while the subscriber announces it is
paused (publisher/pause.py), CANARY_FAILED or WAITING_FOR_CANARY while a staged subscriber
announces it holds its next package or waits for its canaries' statuses, RUNNING otherwise.
The agent is BLOCKED when
any queue is, IDLE when all are empty, RUNNING otherwise.

Nothing is copied per queue: sizes are bisects into the shared cache, and items are decoded
only for the page asked for.

Aggregated (Sling's ``aggregateSubscriberQueues``): instead of one queue per subscriber, two,
``EDITABLE_QUEUE`` over the alive editable subscribers and ``ALL_QUEUE`` over every alive
subscriber, each holding the packages after the lowest processed offset among its members
(the backlog of the member furthest behind). A queue is BLOCKED when one of its members is,
else PAUSED, CANARY_FAILED, WAITING_FOR_CANARY when one is, in that order;
its error queue merges the members'. Only the editable one can be cleared
(publisher/aggregated_clear.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from publisher.discovery import DiscoveryView, Subscriber
from publisher.errors import QueueNotFound
from publisher.queues.cache import QueueCache
from publisher.queues.entries import Entry
from publisher.queues.error_queues import ErrorQueues, ReportedError
from publisher.queues.positions import processed_offset
from runtime.clock import now_ms

ERROR_QUEUE_SUFFIX = "-error"
# The aggregated queues' names; the instance id part (``aggregated``) keeps them apart from any
# ``<instance id>-<agent name>`` a subscriber announces unless one calls itself so.
EDITABLE_QUEUE = "aggregated-editable"
ALL_QUEUE = "aggregated-all"


class QueueState(StrEnum):
    IDLE = "IDLE"
    RUNNING = "RUNNING"
    BLOCKED = "BLOCKED"
    PAUSED = "PAUSED"  # the subscriber imports nothing until resumed (publisher/pause.py)
    # A staged subscriber holds its next package: a canary failed it (cleared or resumed).
    CANARY_FAILED = "CANARY_FAILED"
    # A staged subscriber's next package waits for its canaries' statuses.
    WAITING_FOR_CANARY = "WAITING_FOR_CANARY"


# What holds a queue back, most pressing first (an aggregated queue shows its members' first).
HELD_STATES = (
    QueueState.BLOCKED,
    QueueState.PAUSED,
    QueueState.CANARY_FAILED,
    QueueState.WAITING_FOR_CANARY,
)


def held_state(subscriber: Subscriber) -> QueueState | None:
    """What the subscriber announces holds it back (None: nothing)."""
    if subscriber.paused:
        return QueueState.PAUSED
    if subscriber.canary_failed:
        return QueueState.CANARY_FAILED
    return QueueState.WAITING_FOR_CANARY if subscriber.canary_pending else None


@dataclass(frozen=True)
class QueueSummary:
    name: str
    subscriber: Subscriber
    processed_offset: int | None
    state: QueueState
    size: int
    head_offset: int | None
    head_attempts: int
    lag_ms: int
    error_queue_size: int
    # The subscribers an aggregated queue stands for (empty for a subscriber's own queue).
    members: tuple[Subscriber, ...] = field(default=())

    @property
    def error_queue_name(self) -> str:
        return self.name + ERROR_QUEUE_SUFFIX


@dataclass(frozen=True)
class QueueItem:
    id: str
    offset: int
    entry: Entry | None
    attempts: int
    last_error: ReportedError | None


def failed_attempts(subscriber: Subscriber, error: ReportedError | None) -> int:
    """Attempts made on a package in the error queue: one for a permanent failure (never
    retried; the only kind a blocking subscriber gives up on), else its retries plus one."""
    if (error is not None and error.permanent) or subscriber.max_retries < 0:
        return 1
    return subscriber.max_retries + 1


def entry_id(topic: str, offset: int) -> str:
    """Sling's entry id: ``<topic>-<partition>@<offset>`` (the package topic has partition 0)."""
    return f"{topic}-0@{offset}"


class Queues:
    def __init__(
        self,
        cache: QueueCache,
        discovery: DiscoveryView,
        errors: ErrorQueues,
        *,
        agent_name: str,
        topic: str,
        blocked_after_attempts: int,
        clock_ms: Callable[[], int] = now_ms,
        aggregate: bool = False,
    ) -> None:
        self.cache = cache
        self.discovery = discovery
        self.errors = errors
        self.agent_name = agent_name
        self.topic = topic
        self.blocked_after_attempts = blocked_after_attempts
        self.clock_ms = clock_ms
        self.aggregate = aggregate

    def processed_offset(self, subscriber: Subscriber) -> int | None:
        return processed_offset(subscriber, self.agent_name, self.cache)

    def subscriber(self, name: str) -> Subscriber:
        subscriber = self.discovery.get(name)
        if subscriber is None:
            raise QueueNotFound(f"no alive subscriber has the queue {name!r}")
        return subscriber

    def summaries(self) -> list[QueueSummary]:
        return self.page()[1]

    def page(self, skip: int = 0, limit: int | None = None) -> tuple[int, list[QueueSummary]]:
        """(queues, summaries of the ``limit`` queues after the first ``skip``, by name): only
        the page's queues are computed."""
        if self.aggregate:
            queues = [self._aggregated(n) for n in self.aggregated_names()]
            return len(queues), queues[skip:] if limit is None else queues[skip : skip + limit]
        alive = self.discovery.alive()
        subscribers = alive[skip:] if limit is None else alive[skip : skip + limit]
        processed = [self.processed_offset(s) for s in subscribers]
        offsets = [o for o in processed if o is not None]
        if offsets:
            self.cache.ensure(min(offsets) + 1)
        upto = self.cache.next_offset - 1  # one log end for every queue of the answer
        return len(alive), [
            self._summary(s, o, upto) for s, o in zip(subscribers, processed, strict=True)
        ]

    def aggregated_names(self) -> list[str]:
        """The aggregated queues that have members now, by name."""
        alive = self.discovery.alive()
        names = [ALL_QUEUE] if alive else []
        if any(s.editable for s in alive):
            names.insert(0, EDITABLE_QUEUE)
        return names

    def members(self, name: str) -> list[Subscriber]:
        """The alive subscribers of an aggregated queue; QueueNotFound when it has none."""
        alive = self.discovery.alive()
        members = [s for s in alive if s.editable] if name == EDITABLE_QUEUE else alive
        if not members:
            raise QueueNotFound(f"the aggregated queue {name!r} has no alive subscriber")
        return members

    def is_aggregated(self, name: str) -> bool:
        return self.aggregate and name in (EDITABLE_QUEUE, ALL_QUEUE)

    def _aggregated(self, name: str) -> QueueSummary:
        members = self.members(name)
        each = [self.processed_offset(s) for s in members]
        offsets = [o for o in each if o is not None]
        processed = min(offsets) if offsets else None
        if processed is not None:
            self.cache.ensure(processed + 1)
        upto = self.cache.next_offset - 1
        summaries = [self._summary(s, o, upto) for s, o in zip(members, each, strict=True)]
        behind = [x for x in summaries if x.processed_offset is not None]
        lowest = [x for x in behind if x.processed_offset == processed]
        head = self.cache.head_after(processed, upto) if processed is not None else None
        states = {x.state for x in summaries}
        held = [s for s in HELD_STATES if s in states]
        state = held[0] if held else QueueState.IDLE if head is None else QueueState.RUNNING
        return QueueSummary(
            name=name,
            subscriber=Subscriber(
                sling_id="aggregated",
                agent_name=name.removeprefix("aggregated-"),
                editable=name == EDITABLE_QUEUE,
                max_retries=max(s.max_retries for s in members),
                last_seen_ms=max(s.last_seen_ms for s in members),
            ),
            processed_offset=processed,
            state=state,
            size=self.cache.count_after(processed, upto) if processed is not None else 0,
            head_offset=head[0] if head is not None else None,
            head_attempts=max((x.head_attempts for x in lowest), default=0),
            lag_ms=max(0, self.clock_ms() - head[1]) if head is not None else 0,
            error_queue_size=sum(x.error_queue_size for x in summaries),
            members=tuple(members),
        )

    def summary(self, name: str) -> QueueSummary:
        if self.is_aggregated(name):
            return self._aggregated(name)
        subscriber = self.subscriber(name)
        processed = self.processed_offset(subscriber)
        if processed is not None:
            self.cache.ensure(processed + 1)
        return self._summary(subscriber, processed, self.cache.next_offset - 1)

    def _summary(self, subscriber: Subscriber, processed: int | None, upto: int) -> QueueSummary:
        """The queue of a subscriber that processed up to ``processed`` (its processed_offset),
        up to the log end ``upto`` (the packages the cache read by the time the answer began)."""
        name = subscriber.queue_name
        state = subscriber.states.get(self.agent_name)
        error_size = self.errors.size(name)
        head = self.cache.head_after(processed, upto) if processed is not None else None
        if state is None or processed is None or head is None:
            return QueueSummary(
                name,
                subscriber,
                processed,
                held_state(subscriber) or QueueState.IDLE,
                0,
                None,
                0,
                0,
                error_size,
            )
        attempts = state.retries
        queue_state = (
            QueueState.BLOCKED
            if attempts >= self.blocked_after_attempts
            else held_state(subscriber) or QueueState.RUNNING
        )
        return QueueSummary(
            name=name,
            subscriber=subscriber,
            processed_offset=processed,
            state=queue_state,
            size=self.cache.count_after(processed, upto),
            head_offset=head[0],
            head_attempts=attempts,
            lag_ms=max(0, self.clock_ms() - head[1]),
            error_queue_size=error_size,
        )

    def items(self, name: str, skip: int, limit: int) -> list[QueueItem]:
        if self.is_aggregated(name):
            summary = self._aggregated(name)
            if summary.processed_offset is None:
                return []
            entries = self.cache.items_after(summary.processed_offset, skip, limit)
            return [
                QueueItem(
                    id=entry_id(self.topic, e.offset),
                    offset=e.offset,
                    entry=e,
                    attempts=summary.head_attempts if skip == 0 and i == 0 else 0,
                    last_error=self._member_error(summary.members, e.offset),
                )
                for i, e in enumerate(entries)
            ]
        subscriber = self.subscriber(name)
        processed = self.processed_offset(subscriber)
        if processed is None:
            return []
        self.cache.ensure(processed + 1)
        retries = subscriber.states[self.agent_name].retries
        entries = self.cache.items_after(processed, skip, limit)
        return [
            QueueItem(
                id=entry_id(self.topic, e.offset),
                offset=e.offset,
                entry=e,
                attempts=retries if skip == 0 and i == 0 else 0,
                last_error=self.errors.last_error(name, e.offset),
            )
            for i, e in enumerate(entries)
        ]

    def last_error(self, summary: QueueSummary, offset: int) -> ReportedError | None:
        """The last error reported for ``offset`` in the queue: an aggregated queue's, by
        the first of its members that reported one."""
        if not summary.members:
            return self.errors.last_error(summary.name, offset)
        return self._member_error(summary.members, offset)

    def _member_error(self, members: tuple[Subscriber, ...], offset: int) -> ReportedError | None:
        for s in members:
            error = self.errors.last_error(s.queue_name, offset)
            if error is not None:
                return error
        return None

    def error_items(self, name: str, skip: int, limit: int) -> list[QueueItem]:
        base = name.removesuffix(ERROR_QUEUE_SUFFIX)
        if self.is_aggregated(base):
            # Each member's error queue is sorted: merged, the first skip + limit items need
            # no more than that many from each. A package several members gave up on is an
            # item per member, as in their own error queues.
            members = self.members(base)
            lists = [
                [(offset, i) for offset in self.errors.offsets(s.queue_name, 0, skip + limit)]
                for i, s in enumerate(members)
            ]
            merged = list(heapq.merge(*lists))[skip : skip + limit]
            if merged:
                self.cache.ensure(merged[0][0])
            items = []
            for offset, i in merged:
                error = self.errors.last_error(members[i].queue_name, offset)
                items.append(
                    QueueItem(
                        id=entry_id(self.topic, offset),
                        offset=offset,
                        entry=self.cache.entry_at(offset),
                        attempts=failed_attempts(members[i], error),
                        last_error=error,
                    )
                )
            return items
        subscriber = self.subscriber(base)
        offsets = self.errors.offsets(base, skip, limit)
        if offsets:
            self.cache.ensure(offsets[0])
        items = []
        for offset in offsets:
            error = self.errors.last_error(base, offset)
            items.append(
                QueueItem(
                    id=entry_id(self.topic, offset),
                    offset=offset,
                    entry=self.cache.entry_at(offset),
                    attempts=failed_attempts(subscriber, error),
                    last_error=error,
                )
            )
        return items

    def agent_state(self, summaries: list[QueueSummary] | None = None) -> QueueState:
        summaries = self.summaries() if summaries is None else summaries
        if any(s.state is QueueState.BLOCKED for s in summaries):
            return QueueState.BLOCKED
        if all(s.state is QueueState.IDLE for s in summaries):
            return QueueState.IDLE
        return QueueState.RUNNING
