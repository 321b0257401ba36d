"""The discovery view: which subscribers are alive and how far each has processed.

Built from DiscoveryMessages (read from the earliest retained one, so a restarted publisher
knows its subscribers at once). A subscriber is alive while its last announcement is younger
than the TTL. ``refresh`` compares the alive set with the previous one and logs subscribers
appearing and disappearing.

Announcement time: a record read as it arrives counts from now (robust to clock skew between
machines); an old record (read while catching up at start) counts from its timestamp, so an
hour of retained announcements does not bring long-gone subscribers back to life.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from journal.api import Record
from journal.wire.messages import DiscoveryMessage

log = logging.getLogger(__name__)

# A subscriber silent for this many TTLs is forgotten entirely (it stopped counting as alive
# long before); bounds the view's memory when subscribers come and go all day.
FORGET_AFTER_TTLS = 10


@dataclass(frozen=True)
class SubscriberState:
    """A subscriber's progress on one publisher agent's packages."""

    offset: int
    retries: int


@dataclass(frozen=True)
class Subscriber:
    sling_id: str
    agent_name: str
    editable: bool
    max_retries: int
    last_seen_ms: int
    states: dict[str, SubscriberState] = field(default_factory=dict)

    @property
    def queue_name(self) -> str:
        """Sling's queue name: ``<subscriber instance id>-<subscriber agent name>``."""
        return f"{self.sling_id}-{self.agent_name}"

    @property
    def has_error_queue(self) -> bool:
        return self.max_retries >= 0


def now_ms() -> int:
    return int(time.time() * 1000)


class DiscoveryView:
    def __init__(self, ttl_s: float, clock_ms: Callable[[], int] = now_ms) -> None:
        self.ttl_ms = int(ttl_s * 1000)
        self.clock_ms = clock_ms
        self._lock = threading.Lock()
        self._subscribers: dict[str, Subscriber] = {}
        self._alive_names: set[str] = set()

    def handle(self, message: DiscoveryMessage, record: Record) -> None:
        now = self.clock_ms()
        seen = (
            now if abs(now - record.timestamp_ms) < self.ttl_ms else min(record.timestamp_ms, now)
        )
        config = message.subscriber_configuration
        subscriber = Subscriber(
            sling_id=message.sub_sling_id,
            agent_name=message.sub_agent_name,
            editable=config.editable,
            max_retries=config.max_retries,
            last_seen_ms=seen,
            states={
                s.pub_agent_name: SubscriberState(s.offset, s.retries)
                for s in message.subscriber_state
            },
        )
        with self._lock:
            previous = self._subscribers.get(subscriber.queue_name)
            if previous is None or previous.last_seen_ms <= seen:
                self._subscribers[subscriber.queue_name] = subscriber

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
        for name in sorted(appeared):
            log.info("subscriber %s appeared", name)
        for name in sorted(gone):
            log.info("subscriber %s disappeared (no announcement for %d ms)", name, self.ttl_ms)
        self._alive_names = alive
        with self._lock:
            # Forget subscribers dead for long: only the alive set matters.
            cutoff = self.clock_ms() - FORGET_AFTER_TTLS * self.ttl_ms
            for name in [n for n, s in self._subscribers.items() if s.last_seen_ms < cutoff]:
                del self._subscribers[name]
        return appeared, gone
