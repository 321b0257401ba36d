"""The journal contract on a real Kafka broker, plus broker faults."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest

from journal.api import Journal, Position, TopicSpec
from journal.errors import JournalUnavailable
from journal.kafka import KafkaJournal
from tests.contract.journal_contract import (
    GarbageOnEveryTopic,
    JournalContract,
    NewTopic,
    read_all,
)
from tests.services import KafkaService

pytestmark = pytest.mark.integration

_names = itertools.count()


@pytest.fixture
def journal(kafka_service: KafkaService) -> Iterator[KafkaJournal]:
    with KafkaJournal(kafka_service.bootstrap) as j:
        yield j


@pytest.fixture
def new_topic(journal: Journal, unique_name: str) -> NewTopic:
    def make(**kwargs: int) -> str:
        name = f"{unique_name}-{next(_names)}"
        journal.create_topics([TopicSpec(name, **kwargs)])
        return name

    return make


class TestKafkaJournal(JournalContract, GarbageOnEveryTopic):
    pass


# How long a send may wait for its acknowledgement in the outage test: short so the test is
# quick, long enough for a healthy broker on a loaded 2-core machine.
OUTAGE_SEND_TIMEOUT_S = 5.0


@pytest.mark.slow
def test_broker_stop_fails_sends_in_time_and_loses_nothing_acknowledged(
    kafka_service: KafkaService, unique_name: str
) -> None:
    if not kafka_service.restartable:
        pytest.skip("this Kafka service cannot be restarted by tests")
    topic = f"{unique_name}-outage"
    journal = KafkaJournal(kafka_service.bootstrap, send_timeout_s=OUTAGE_SEND_TIMEOUT_S)
    journal.create_topics([TopicSpec(topic)])
    acked = {journal.send(topic, f"before-{i}".encode()): f"before-{i}".encode() for i in range(20)}

    kafka_service.stop()
    try:
        started = time.monotonic()
        with pytest.raises(JournalUnavailable) as info:
            journal.send(topic, b"during-outage")
        elapsed = time.monotonic() - started
        assert elapsed < OUTAGE_SEND_TIMEOUT_S + 5, f"send failed only after {elapsed:.1f} s"
        assert "Kafka" in str(info.value)
    finally:
        kafka_service.start()

    deadline = time.monotonic() + 60
    while True:  # the restarted broker may need a moment to lead the partition again
        try:
            offset = journal.send(topic, b"after")
            break
        except JournalUnavailable:
            if time.monotonic() > deadline:
                raise
    acked[offset] = b"after"
    journal.close()

    with KafkaJournal(kafka_service.bootstrap) as reader:
        records = read_all(reader, topic, Position.earliest(), len(acked))
    found = {r.offset: r.value for r in records}
    for off, value in acked.items():
        assert found.get(off) == value, f"acknowledged record at offset {off} lost"
