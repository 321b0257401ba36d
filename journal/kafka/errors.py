"""librdkafka errors as journal errors: whether a retry can help decides JournalUnavailable
(retriable) against JournalError."""

from __future__ import annotations

import logging

from confluent_kafka import KafkaError

from journal.errors import JournalError, JournalUnavailable, UnknownTopic

log = logging.getLogger(__name__)


def log_client_error(err: KafkaError) -> None:
    # Transport errors while a broker restarts are expected and retried by librdkafka.
    log.warning("kafka client: %s", err)


def journal_error(err: KafkaError, action: str, where: str = "Kafka") -> JournalError:
    code = err.code()
    if code == KafkaError.MSG_SIZE_TOO_LARGE:
        return JournalError(f"{action}: broker refused the record size: {err.str()}")
    if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
        return UnknownTopic(f"{action}: {err.str()}")
    if err.retriable() or code in (
        KafkaError._MSG_TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TIMED_OUT,
        KafkaError.REQUEST_TIMED_OUT,
        # Leadership moves during a broker restart or rebalance; the next attempt succeeds.
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        # The client's own metadata lacks the partition (just after a broker restart, before
        # its next metadata refresh): a missing topic is UnknownTopic above.
        KafkaError._UNKNOWN_PARTITION,
    ):
        return JournalUnavailable(f"{action}: {where} unavailable: {err.str()}")
    return JournalError(f"{action}: {err.str()}")
