"""Leader election among the instances of one publisher agent: exactly one runs the
leader-only jobs (distributed events, blob cleanup); another takes over when it dies.

No home-made consensus: on Kafka, group membership on a one-partition coordination topic (the
member the group coordinator assigns partition 0 leads; a dead member is evicted after the
session timeout and the partition reassigned); on the embedded SQLite backend, an exclusive
``flock`` on a file beside the database (the kernel releases it when the process dies).

Handover is safe: losing leadership (``on_revoke``) waits for the leader job in progress to
finish (``jobs_lock``) before the member rejoins, so the next leader never overlaps with it.
"""

from __future__ import annotations

import abc
import fcntl
import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from journal.api import Journal, TopicSpec
from journal.settings import JournalSettings
from journal.supervisor import SupervisedThread
from publisher.settings import PublisherSettings

log = logging.getLogger(__name__)

# Membership poll: heartbeats run in librdkafka's background thread, but rebalance callbacks
# only run inside poll(), so this bounds how late a revoke is noticed.
LEADER_POLL_S = 0.5
# The coordination topic carries no records; an hour of retention keeps it empty.
LEADER_TOPIC_RETENTION_MS = 3600 * 1000
# Heartbeats every third of the session timeout (Kafka's recommended ratio).
HEARTBEAT_FRACTION = 3
# A leader job (an events tick with a head fetch) may hold the poll loop's revoke callback for
# up to a minute; five minutes (Kafka's default) keeps the member in the group meanwhile.
MAX_POLL_INTERVAL_MS = 300_000

Listener = Callable[[bool], None]


class Leadership(abc.ABC):
    def __init__(self) -> None:
        self.jobs_lock = threading.Lock()
        self._leader = False
        self._listener: Listener | None = None
        self._stop = threading.Event()
        self.thread: SupervisedThread | None = None

    @property
    def is_leader(self) -> bool:
        return self._leader

    def start(self, listener: Listener | None = None) -> Leadership:
        self._listener = listener
        # Supervised: each _run releases leadership on the way out (its finally), so a restart
        # after a failure competes for it again from scratch.
        self.thread = SupervisedThread("publisher-leader", self._run, stop=self._stop).start()
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self.thread is not None:
            self.thread.join(timeout_s)
        self._set(False)

    def _set(self, leader: bool) -> None:
        with self.jobs_lock:
            if leader == self._leader:
                return
            self._leader = leader
            log.info("%s leadership of the publisher agent", "took" if leader else "gave up")
            if self._listener is not None:
                self._listener(leader)

    @abc.abstractmethod
    def _run(self) -> None: ...


class KafkaLeadership(Leadership):
    def __init__(
        self,
        journal: Journal,
        client_config: Mapping[str, Any],
        topic: str,
        group_id: str,
        session_timeout_s: float,
    ) -> None:
        super().__init__()
        self.journal = journal
        self.topic = topic
        session_ms = int(session_timeout_s * 1000)
        self.config: dict[str, Any] = {
            **client_config,
            "group.id": group_id,
            "session.timeout.ms": session_ms,
            "heartbeat.interval.ms": max(100, session_ms // HEARTBEAT_FRACTION),
            "max.poll.interval.ms": MAX_POLL_INTERVAL_MS,
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
            "partition.assignment.strategy": "range",
        }

    def start(self, listener: Listener | None = None) -> Leadership:
        self.journal.create_topics([TopicSpec(self.topic, 1, LEADER_TOPIC_RETENTION_MS)])
        return super().start(listener)

    def _on_assign(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if any(p.partition == 0 for p in partitions):
            self._set(True)

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if any(p.partition == 0 for p in partitions):
            self._set(False)

    def _run(self) -> None:
        consumer = Consumer(self.config)
        consumer.subscribe(
            [self.topic],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_revoke,
        )
        try:
            while not self._stop.is_set():
                try:
                    message = consumer.poll(LEADER_POLL_S)
                except KafkaException as exc:
                    log.warning("leader election: %s", exc)
                    continue
                if message is not None and message.error() is not None:
                    log.debug("leader election: %s", message.error())
        finally:
            # Leaving the group revokes partition 0 at once: a clean shutdown hands leadership
            # over without waiting for the session timeout.
            consumer.close()
            self._set(False)  # no member any more, whether or not close() ran the revoke


class FileLockLeadership(Leadership):
    def __init__(self, path: Path, retry_s: float) -> None:
        super().__init__()
        self.path = path
        self.retry_s = retry_s

    def _run(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            while not self._stop.is_set():
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    self._stop.wait(self.retry_s)
                    continue
                self._set(True)
                self._stop.wait()
        finally:
            self._set(False)
            os.close(fd)  # releases the lock


def leader_group_id(agent_name: str) -> str:
    """The Kafka consumer group whose members compete for the leadership of ``agent_name``."""
    return f"scd-publisher-leader-{agent_name}"


def make_leadership(
    journal: Journal, journal_settings: JournalSettings, settings: PublisherSettings
) -> Leadership:
    if journal_settings.backend == "kafka":
        return KafkaLeadership(
            journal,
            {
                "bootstrap.servers": journal_settings.bootstrap_servers,
                **journal_settings.client_config(),
            },
            settings.leader_topic,
            leader_group_id(settings.agent_name),
            settings.leader_session_timeout_s,
        )
    lock = journal_settings.sqlite_path.with_name(
        f"{journal_settings.sqlite_path.name}.{settings.agent_name}.leader.lock"
    )
    return FileLockLeadership(lock, settings.leader_lock_retry_s)
