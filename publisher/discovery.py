"""The discovery view: which subscribers are alive and how far each has processed.

Built from DiscoveryMessages (read from the earliest retained one, so a restarted publisher
knows its subscribers at once). A subscriber is alive while its last announcement is younger
than the TTL. ``refresh`` compares the alive set with the previous one and logs subscribers
appearing and disappearing.

Announcement time: a record read as it arrives counts from now (robust to clock skew between
machines); an old record (read while catching up at start) counts from its timestamp, so an
hour of retained announcements does not bring long-gone subscribers back to life.

Bounded: the view holds at most ``max_subscribers``; a new subscriber beyond it drops the least
recently announced one (counted in ``scd_discovery_dropped_total``, logged at most every 10 s),
so announcements under any number of forged instance ids cost bounded memory. A real
subscriber dropped that way comes back with its next announcement (every 10 s). Announcements
with out-of-range fields are bad records (publisher/bad_records.py).

Announcements read from another region's copy of the discovery topic (``handle_remote``) mark
the subscriber remote: its offsets are the copy's, and its queue is placed by the sequence
numbers it announces (publisher/queues/positions.py).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from journal.api import Record
from journal.wire.messages import DiscoveryMessage
from publisher.bad_records import check_count, check_name, check_offset
from publisher.errors import BadRecord
from publisher.metrics import PublisherMetrics
from publisher.settings import DEFAULT_MAX_SUBSCRIBERS
from runtime.clock import now_ms
from runtime.ratelog import RateLimitedLog

log = logging.getLogger(__name__)

# A subscriber silent for this many TTLs is forgotten entirely (it stopped counting as alive
# long before); bounds the view's memory when subscribers come and go all day.
FORGET_AFTER_TTLS = 10
# A subscriber reports its state per publisher agent it follows: a handful in practice. More
# than this in one announcement is forged (and would multiply the view's memory).
MAX_STATES_PER_SUBSCRIBER = 64
# Canaries a staged subscriber names as pending or failed (its setting allows 100).
MAX_CANARIES = 100
# Subscribers named one by one when they appear or disappear in one refresh; beyond it (a flood
# of forged announcements) only their number is logged.
MAX_NAMED_CHANGES = 10


@dataclass(frozen=True)
class SubscriberState:
    """A subscriber's progress on one publisher agent's packages."""

    offset: int
    retries: int
    # The last package sequence number of the agent applied (0: not numbered or unknown).
    sequence: int = 0


@dataclass(frozen=True)
class Subscriber:
    sling_id: str
    agent_name: str
    editable: bool
    max_retries: int
    last_seen_ms: int
    states: dict[str, SubscriberState] = field(default_factory=dict)
    paused: bool = False  # by a pause command (publisher/pause.py), until resumed
    # A staged subscriber's wait: canaries that did not report its next package yet, and
    # canaries that failed it for good (held until cleared or resumed).
    canary_pending: tuple[str, ...] = ()
    canary_failed: tuple[str, ...] = ()
    # Announced on another region's copy of the discovery topic: its offsets are the copy's
    # (publisher/queues/positions.py maps its sequence numbers to this log's offsets).
    remote: bool = False

    @property
    def queue_name(self) -> str:
        """Sling's queue name: ``<subscriber instance id>-<subscriber agent name>``."""
        return f"{self.sling_id}-{self.agent_name}"


def subscriber_of(message: DiscoveryMessage, seen_ms: int, remote: bool = False) -> Subscriber:
    """The announced subscriber; BadRecord if a field is out of range."""
    if len(message.subscriber_state) > MAX_STATES_PER_SUBSCRIBER:
        raise BadRecord(
            f"{len(message.subscriber_state)} subscriber states (at most "
            f"{MAX_STATES_PER_SUBSCRIBER})"
        )
    states = {}
    for s in message.subscriber_state:
        name = check_name(s.pub_agent_name, "subscriber_state.pub_agent_name")
        # -1: nothing processed yet.
        states[name] = SubscriberState(
            check_offset(s.offset, "subscriber_state.offset", minimum=-1),
            check_count(s.retries, "subscriber_state.retries"),
            check_count(s.sequence, "subscriber_state.sequence"),
        )
    canaries = [*message.canary_pending, *message.canary_failed]
    if len(canaries) > MAX_CANARIES:
        raise BadRecord(f"{len(canaries)} canaries (at most {MAX_CANARIES})")
    for name in canaries:
        check_name(name, "canary")
    config = message.subscriber_configuration
    return Subscriber(
        sling_id=check_name(message.sub_sling_id, "sub_sling_id"),
        agent_name=check_name(message.sub_agent_name, "sub_agent_name"),
        editable=config.editable,
        max_retries=config.max_retries,  # any int32; negative: retry forever
        last_seen_ms=seen_ms,
        states=states,
        paused=message.paused,
        canary_pending=tuple(message.canary_pending),
        canary_failed=tuple(message.canary_failed),
        remote=remote,
    )


class DiscoveryView:
    def __init__(
        self,
        ttl_s: float,
        clock_ms: Callable[[], int] = now_ms,
        *,
        max_subscribers: int = DEFAULT_MAX_SUBSCRIBERS,
        metrics: PublisherMetrics | None = None,
    ) -> None:
        self.ttl_ms = int(ttl_s * 1000)
        self.clock_ms = clock_ms
        self.max_subscribers = max_subscribers
        self.metrics = metrics
        self.dropped = 0
        self._drop_log = RateLimitedLog(log)
        self._lock = threading.Lock()
        # Least recently announced first: the end a full view drops from.
        self._subscribers: OrderedDict[str, Subscriber] = OrderedDict()
        self._alive_names: set[str] = set()

    def handle(self, message: DiscoveryMessage, record: Record) -> None:
        """An announcement read from the publisher's own discovery topic."""
        self._handle(message, record, remote=False)

    def handle_remote(self, message: DiscoveryMessage, record: Record) -> None:
        """An announcement read from another region's copy (its offsets are the copy's)."""
        self._handle(message, record, remote=True)

    def _handle(self, message: DiscoveryMessage, record: Record, *, remote: bool) -> None:
        now = self.clock_ms()
        seen = (
            now if abs(now - record.timestamp_ms) < self.ttl_ms else min(record.timestamp_ms, now)
        )
        subscriber = subscriber_of(message, seen, remote)
        name = subscriber.queue_name
        dropped: list[str] = []
        with self._lock:
            previous = self._subscribers.get(name)
            if previous is not None and previous.last_seen_ms > seen:
                return
            self._subscribers[name] = subscriber
            self._subscribers.move_to_end(name)
            while len(self._subscribers) > self.max_subscribers:
                dropped.append(self._subscribers.popitem(last=False)[0])
            self.dropped += len(dropped)
        if dropped:
            self._report_drops(dropped)

    def _report_drops(self, dropped: list[str]) -> None:
        if self.metrics is not None:
            self.metrics.discovery_dropped.inc(len(dropped))
        self._drop_log.log(
            logging.WARNING,
            "discovery view full (%d subscribers, SCD_PUBLISHER_MAX_SUBSCRIBERS): dropped the "
            "least recently announced, %s (%d dropped so far)",
            self.max_subscribers,
            dropped[0],
            self.dropped,
        )

    def __len__(self) -> int:
        with self._lock:
            return len(self._subscribers)

    def alive(self) -> list[Subscriber]:
        """Alive subscribers, sorted by queue name."""
        cutoff = self.clock_ms() - self.ttl_ms
        with self._lock:
            return sorted(
                (s for s in self._subscribers.values() if s.last_seen_ms > cutoff),
                key=lambda s: s.queue_name,
            )

    def get(self, queue_name: str) -> Subscriber | None:
        cutoff = self.clock_ms() - self.ttl_ms
        with self._lock:
            subscriber = self._subscribers.get(queue_name)
        return subscriber if subscriber is not None and subscriber.last_seen_ms > cutoff else None

    def refresh(self) -> tuple[set[str], set[str]]:
        """Log and return the subscribers that appeared and disappeared since the last call."""
        alive = {s.queue_name for s in self.alive()}
        appeared, gone = alive - self._alive_names, self._alive_names - alive
        for name in sorted(appeared)[:MAX_NAMED_CHANGES]:
            log.info("subscriber %s appeared", name)
        for name in sorted(gone)[:MAX_NAMED_CHANGES]:
            log.info("subscriber %s disappeared (no announcement for %d ms)", name, self.ttl_ms)
        if max(len(appeared), len(gone)) > MAX_NAMED_CHANGES:
            log.warning(
                "%d subscribers appeared and %d disappeared since the last refresh (only %d "
                "of each named)",
                len(appeared),
                len(gone),
                MAX_NAMED_CHANGES,
            )
        self._alive_names = alive
        with self._lock:
            # Forget subscribers dead for long: only the alive set matters.
            cutoff = self.clock_ms() - FORGET_AFTER_TTLS * self.ttl_ms
            for name in [n for n, s in self._subscribers.items() if s.last_seen_ms < cutoff]:
                del self._subscribers[name]
        return appeared, gone
