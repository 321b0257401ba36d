"""The journal contract on a real Kafka broker, plus broker faults."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from journal.api import Journal, OutgoingRecord, Position, TopicSpec
from journal.errors import JournalUnavailable
from journal.kafka.consumer import KafkaConsumer
from journal.kafka.journal import KafkaJournal
from tests.contract.journal_contract import (
    GarbageOnEveryTopic,
    JournalContract,
    NewTopic,
    read_all,
)
from tests.services import KafkaService


@pytest.fixture(scope="module")
def kafka_service(own_kafka: KafkaService) -> KafkaService:
    """A test here stops the broker: this module's own, not the shared one."""
    return own_kafka


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


def _poll_until(consumer: KafkaConsumer, count: int, within_s: float) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + within_s
    while len(values) < count and time.monotonic() < deadline:
        values.extend(r.value for r in consumer.poll(0.2))
    return values


class _Unanswering:
    """A librdkafka consumer whose offset queries time out; everything else passes through."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def get_watermark_offsets(self, *args: Any, **kwargs: Any) -> tuple[int, int]:
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_consumer_that_stops_fetching_is_restarted_at_its_positions(
    kafka_service: KafkaService, unique_name: str
) -> None:
    topic = f"{unique_name}-stall"
    with KafkaJournal(kafka_service.bootstrap, stall_check_s=1.0) as journal:
        journal.create_topics([TopicSpec(topic)])
        journal.send(topic, b"r0")
        consumer = journal.consumer(topic, Position.earliest())
        assert isinstance(consumer, KafkaConsumer)
        with consumer:
            assert _poll_until(consumer, 1, 10) == [b"r0"]
            # A fetcher that silently stops, as librdkafka's can after a broker restart, in a
            # client that does not answer offset queries either.
            consumer._consumer.pause([TopicPartition(topic, 0)])
            consumer._consumer = _Unanswering(consumer._consumer)  # type: ignore[assignment]
            journal.send(topic, b"r1")
            journal.send(topic, b"r2")
            started = time.monotonic()
            rest = _poll_until(consumer, 2, 20)
            assert rest == [b"r1", b"r2"], "the stalled consumer never delivered the records"
            assert consumer.restarts == 1
            assert time.monotonic() - started < 10
            assert consumer.positions() == {0: journal.latest_offset(topic)}
            # Caught up: quiet polls past the check interval restart nothing.
            assert _poll_until(consumer, 1, 2.5) == []
            assert consumer.restarts == 1


def test_a_batch_left_open_by_a_dead_writer_is_aborted_when_the_next_one_opens(
    journal: KafkaJournal, new_topic: NewTopic, unique_name: str
) -> None:
    """A writer that dies inside a batch (produced, never committed) holds committed-only
    readers back; its successor's opening aborts the batch, and readers move on."""
    topic = new_topic()
    fence_id = f"{unique_name}-fence"
    dead = Producer({"bootstrap.servers": journal.bootstrap_servers, "transactional.id": fence_id})
    dead.init_transactions(10)
    dead.begin_transaction()
    dead.produce(topic, b"never-committed")
    dead.flush(10)  # on the broker, inside an open transaction

    successor = journal.fenced_writer(fence_id)
    successor.write(topic, [OutgoingRecord(b"after")])
    assert [r.value for r in read_all(journal, topic, Position.earliest(), 1)] == [b"after"]
    successor.close()


def test_a_fenced_writer_batch_larger_than_the_producer_queue_still_lands_whole(
    kafka_service: KafkaService, unique_name: str
) -> None:
    # librdkafka's local queue holds 5 records here; the batch has 12.
    small = {"queue.buffering.max.messages": "5"}
    with KafkaJournal(kafka_service.bootstrap, client_config=small) as journal:
        topic = f"{unique_name}-small-queue"
        journal.create_topics([TopicSpec(topic)])
        writer = journal.fenced_writer(f"{unique_name}-fence")
        writer.write(topic, [OutgoingRecord(f"r{i}".encode()) for i in range(12)])
        writer.close()
        values = [r.value for r in read_all(journal, topic, Position.earliest(), 12)]
    assert values == [f"r{i}".encode() for i in range(12)]
