"""Publisher replicas: every instance of an agent accepts requests, one writes.

The instances of one agent elect a leader (publisher/leader.py). Only the leader writes the
agent's numbered records, through its fenced writers (journal/sequence.py): the numbers stay
one sequence in the order of the log, whatever instance a balancer sends a request to. The
others forward every request that writes (publisher/api/forward.py) to the leader, at the
address the leader announces on the leader topic (``LeaderDirectory``) every few seconds.

An announcement is a hint, not a right to write: the fence is what keeps a deposed leader (one
paused, cut off from Kafka, or not yet aware of the election) from landing anything. A request
forwarded to an instance that does not lead fails as unavailable (503, a retry helps) instead
of travelling on, so a stale announcement costs a retry, never a loop.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass

from journal.api import Journal, Position, TopicSpec
from journal.errors import JournalError, JournalUnavailable

log = logging.getLogger(__name__)

ANNOUNCEMENT_TYPE = "scd.publisher.leader"
# The leader announces itself this often; an announcement older than STALE_S names no leader.
ANNOUNCE_EVERY_S = 5.0
STALE_S = 30.0
# Announcements of every agent of a cluster share the topic: the last ones are within reach.
SCAN_RECORDS = 200
SCAN_TIMEOUT_S = 5.0
POLL_S = 0.2
# A follower reads the topic again at most this often while requests wait for a leader.
LOOKUP_EVERY_S = 0.5
# Announcements only need to outlive a few rounds; an hour keeps the topic small.
RETENTION_MS = 3600 * 1000
MAX_ANNOUNCEMENT_BYTES = 4096


@dataclass(frozen=True)
class LeaderAddress:
    instance_id: str
    url: str
    announced_ms: int


def parse_announcement(value: bytes, agent: str) -> LeaderAddress | None:
    """The address in one record of the leader topic, None when it is not ``agent``'s or is
    malformed (the topic is writable by others: nothing in it is trusted beyond its shape)."""
    if len(value) > MAX_ANNOUNCEMENT_BYTES:
        return None
    try:
        data = json.loads(value)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("agent") != agent:
        return None
    instance, url, at = data.get("instance"), data.get("url"), data.get("announcedMs")
    if not (isinstance(instance, str) and isinstance(url, str) and isinstance(at, int)):
        return None
    if not url.startswith(("http://", "https://")):
        return None
    return LeaderAddress(instance, url.rstrip("/"), at)


class LeaderDirectory:
    """Where the leader of one agent serves its API: announced by the leader, read by the
    other instances (thread-safe)."""

    def __init__(
        self, journal: Journal, topic: str, agent: str, instance_id: str, url: str
    ) -> None:
        self.journal = journal
        self.topic = topic
        self.agent = agent
        self.instance_id = instance_id
        self.url = url
        self._lock = threading.Lock()
        self._known: LeaderAddress | None = None
        self._looked_up = 0.0
        # Why the last reading of the leader topic failed (None: it succeeded), for the answer
        # of a request that found no leader.
        self.read_error: str | None = None

    def open(self) -> None:
        self.journal.create_topics([TopicSpec(self.topic, 1, RETENTION_MS)])

    def announce(self) -> None:
        """Say that this instance leads (the leader, every ANNOUNCE_EVERY_S)."""
        value = json.dumps(
            {
                "agent": self.agent,
                "instance": self.instance_id,
                "url": self.url,
                "announcedMs": int(time.time() * 1000),
            }
        ).encode()
        self.journal.send(self.topic, value, headers={"type": ANNOUNCEMENT_TYPE})

    def leader(self, refresh: bool = False) -> LeaderAddress | None:
        """The last leader announced within STALE_S; None when none is. Read from the topic
        again when ``refresh`` (the one known did not answer) or when what is known is older
        than two announcements, at most every LOOKUP_EVERY_S."""
        with self._lock:
            if self._due(refresh):
                self._looked_up = time.monotonic()
                try:
                    self._known = self._read() or self._known
                    self.read_error = None
                except JournalError as exc:
                    self.read_error = str(exc)
                    log.warning("reading the leader of %s failed: %s", self.agent, exc)
            known = self._known
        if known is None or _age_s(known) > STALE_S:
            return None
        return known

    def _due(self, refresh: bool) -> bool:
        if time.monotonic() - self._looked_up < LOOKUP_EVERY_S:
            return False
        known = self._known
        return refresh or known is None or _age_s(known) > 2 * ANNOUNCE_EVERY_S

    def _read(self) -> LeaderAddress | None:
        end = self.journal.latest_offset(self.topic)
        found: LeaderAddress | None = None
        deadline = time.monotonic() + SCAN_TIMEOUT_S
        with self.journal.consumer(self.topic, Position.latest(-SCAN_RECORDS), [0]) as consumer:
            while consumer.positions().get(0, end) < end:
                if time.monotonic() > deadline:
                    raise JournalUnavailable(
                        f"reading the last announcements on {self.topic} took over "
                        f"{SCAN_TIMEOUT_S} s"
                    )
                for record in consumer.poll(POLL_S):
                    if record.offset >= end:
                        continue
                    if record.headers.get("type") != ANNOUNCEMENT_TYPE:
                        continue
                    address = parse_announcement(record.value, self.agent)
                    if address is not None:
                        found = address
        return found


def _age_s(address: LeaderAddress) -> float:
    return time.time() - address.announced_ms / 1000
