"""Leader election on Kafka: the member of a consumer group that the group coordinator assigns
partition 0 of a one-partition coordination topic leads; a dead member is evicted after the
session timeout and the partition reassigned."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from journal.api import Journal, TopicSpec
from journal.leadership import Election, Leadership, Listener

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


class KafkaLeadership(Leadership):
    def __init__(
        self, journal: Journal, client_config: Mapping[str, Any], election: Election
    ) -> None:
        super().__init__(election.thread_name)
        self.journal = journal
        self.topic = election.topic
        session_ms = int(election.session_timeout_s * 1000)
        self.config: dict[str, Any] = {
            **client_config,
            "group.id": election.name,
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
        # Rebalances are rare: each is logged, so that a slow handover can be read afterwards.
        log.info("%s: assigned %s", self.thread_name, [p.partition for p in partitions])
        if any(p.partition == 0 for p in partitions):
            self._set(True)

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.info("%s: revoked %s", self.thread_name, [p.partition for p in partitions])
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
