"""KafkaConsumer's records and positions, from scripted consume() batches: no broker needed.

KafkaRecord reads its fields from confluent-kafka's Message on access
(journal/kafka/consumer.py); these tests pin that it shows the same fields a stored Record
would, and that poll() moves positions and handles error events as before.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException, Message, TopicPartition

from journal.api import Record
from journal.errors import JournalError, JournalUnavailable
from journal.kafka import consumer as kafka_consumer
from journal.kafka import fenced as kafka_fenced
from journal.kafka import journal as kafka_journal
from journal.kafka.consumer import STALL_CHECK_S, KafkaConsumer, KafkaRecord
from journal.kafka.errors import journal_error
from journal.kafka.journal import KafkaJournal

TOPIC = "t"
# A record timestamp (ms since the epoch, November 2023): any value the client passes through.
STAMP_MS = 1_700_000_000_123


def message(partition: int, offset: int, value: bytes | None = b"v", **kwargs: Any) -> Message:
    return Message(topic=TOPIC, partition=partition, offset=offset, value=value, **kwargs)


def error_event(fatal: bool) -> Message:
    code = KafkaError._FATAL if fatal else KafkaError._TRANSPORT
    return Message(topic=TOPIC, partition=0, error=KafkaError(code, "staged", fatal=fatal))


class ScriptedClient:
    """Stands in for confluent-kafka's Consumer: consume() returns the next scripted batch."""

    def __init__(self, _config: dict[str, Any]) -> None:
        self.batches: list[list[Message]] = []

    def assign(self, partitions: list[TopicPartition]) -> None:
        pass

    def consume(self, num_messages: int, timeout: float) -> list[Message]:  # noqa: ARG002
        return self.batches.pop(0) if self.batches else []

    def poll(self, timeout: float) -> Message | None:  # noqa: ARG002 -- confluent's API
        """The next scripted message on its own (the rest of its batch stays queued)."""
        if not self.batches:
            return None
        batch = self.batches[0]
        first = batch.pop(0)
        if not batch:
            self.batches.pop(0)
        return first

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Like a client that consumed nothing past what consume() and poll() returned."""
        return [TopicPartition(tp.topic, tp.partition, OFFSET_INVALID) for tp in partitions]

    def close(self) -> None:
        pass


def _no_stall_check(_topic: str, _partition: int) -> int:
    raise AssertionError("these polls never stay quiet long enough for a stall check")


def scripted_consumer(
    monkeypatch: pytest.MonkeyPatch,
    start: dict[int, int],
    *batches: list[Message],
    stall_check_s: float = STALL_CHECK_S,
    high_watermark: Callable[[str, int], int] = _no_stall_check,
) -> KafkaConsumer:
    monkeypatch.setattr(kafka_consumer, "RdConsumer", ScriptedClient)
    assignment = [TopicPartition(TOPIC, p, o) for p, o in start.items()]
    consumer = KafkaConsumer(
        TOPIC, {"bootstrap.servers": "unused:9092"}, assignment, stall_check_s, high_watermark
    )
    client = consumer._consumer
    assert isinstance(client, ScriptedClient)
    client.batches.extend(batches)
    return consumer


def test_record_fields_come_from_the_message() -> None:
    msg = message(
        2,
        41,
        b"\x00payload",
        key=b"k",
        timestamp=(1, STAMP_MS),
        headers=[("type", b"T"), ("x", "é".encode()), ("empty", None), ("bad", b"\xff")],
    )
    record = KafkaRecord(msg)
    assert isinstance(record, Record)
    assert (record.topic, record.partition, record.offset) == (TOPIC, 2, 41)
    assert (record.key, record.value, record.timestamp_ms) == (b"k", b"\x00payload", STAMP_MS)
    assert record.headers == {"type": "T", "x": "é", "empty": "", "bad": "\ufffd"}
    assert record.headers is record.headers  # decoded once
    assert "t-2@41, 8 bytes" in repr(record)


def test_record_without_headers_key_or_value() -> None:
    record = KafkaRecord(message(0, 0, None))
    assert record.headers == {}
    assert record.key is None
    assert record.value == b""  # a tombstone reads as an empty value, as before
    with pytest.raises(TypeError):
        record.headers["type"] = "x"  # type: ignore[index]  # the shared empty headers


def test_records_are_read_only() -> None:
    stored = Record(TOPIC, 0, 1, 2, None, {}, b"v")
    with pytest.raises(AttributeError):
        stored.value = b"w"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        KafkaRecord(message(0, 1)).value = b"w"  # type: ignore[misc]


def test_poll_moves_every_partition_past_its_last_record(monkeypatch: pytest.MonkeyPatch) -> None:
    consumer = scripted_consumer(
        monkeypatch,
        {0: 10, 1: 0, 2: 5},
        [message(0, 10), message(1, 0), message(0, 11), message(1, 1), message(0, 12)],
        [message(2, 5)],
    )
    first = consumer.poll(0.1)
    assert [(r.partition, r.offset) for r in first] == [(0, 10), (1, 0), (0, 11), (1, 1), (0, 12)]
    assert consumer.positions() == {0: 13, 1: 2, 2: 5}
    assert [(r.partition, r.offset) for r in consumer.poll(0.1)] == [(2, 5)]
    assert consumer.positions() == {0: 13, 1: 2, 2: 6}
    assert consumer.poll(0.1) == []
    assert consumer.positions() == {0: 13, 1: 2, 2: 6}


def test_poll_skips_error_events(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    consumer = scripted_consumer(
        monkeypatch, {0: 0}, [message(0, 0), error_event(fatal=False), message(0, 1, b"w")]
    )
    with caplog.at_level(logging.WARNING, logger="journal.kafka.consumer"):
        records = consumer.poll(0.1)
    assert [(r.offset, r.value) for r in records] == [(0, b"v"), (1, b"w")]
    assert consumer.positions() == {0: 2}
    assert "staged" in caplog.text


def test_fatal_error_raises_before_positions_move(monkeypatch: pytest.MonkeyPatch) -> None:
    consumer = scripted_consumer(
        monkeypatch, {0: 0}, [message(0, 0), error_event(fatal=True), message(0, 1)]
    )
    with pytest.raises(JournalError, match="staged"):
        consumer.poll(0.1)
    # The batch's records were not handed out: a consumer started here reads them again.
    assert consumer.positions() == {0: 0}


def test_error_events_alone_do_not_count_as_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that only reports errors while records wait is stalled: it is replaced."""
    consumer = scripted_consumer(
        monkeypatch,
        {0: 3},
        [error_event(fatal=False)],
        stall_check_s=0.0,
        high_watermark=lambda _topic, _partition: 8,
    )
    assert consumer.poll(0.1) == []
    assert consumer.restarts == 0, "records found waiting once are only a suspicion"
    assert consumer.poll(0.1) == []
    assert consumer.restarts == 1
    assert consumer.positions() == {0: 3}


def test_records_fetched_after_the_suspicion_clear_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that was only reconnecting fetches before the confirmation: not restarted."""
    high = 8
    consumer = scripted_consumer(
        monkeypatch, {0: 3}, stall_check_s=0.0, high_watermark=lambda _topic, _partition: high
    )
    assert consumer.poll(0.1) == []
    assert consumer.restarts == 0
    client = consumer._consumer
    assert isinstance(client, ScriptedClient)
    client.batches.append([message(0, offset) for offset in range(3, 8)])
    assert [r.offset for r in consumer.poll(0.1)] == [3, 4, 5, 6, 7]
    high = 9  # one more record waits at the new position: a new suspicion, not a confirmation
    assert consumer.poll(0.1) == []
    assert consumer.restarts == 0


def test_no_restart_when_the_broker_cannot_say(monkeypatch: pytest.MonkeyPatch) -> None:
    def unanswered(_topic: str, _partition: int) -> int:
        raise JournalError("no answer")

    consumer = scripted_consumer(monkeypatch, {0: 3}, stall_check_s=0.0, high_watermark=unanswered)
    assert consumer.poll(0.1) == []
    assert consumer.restarts == 0


def test_an_open_transaction_ends_before_a_consumer_would_call_itself_stalled() -> None:
    """Records behind an open transaction are not fetchable yet; the transaction times out
    before the stall check would replace a client waiting for them."""
    assert (
        kafka_fenced.TRANSACTION_TIMEOUT_MS / 1000 < STALL_CHECK_S + kafka_consumer.STALL_CONFIRM_S
    )


def test_a_partition_the_client_does_not_know_yet_is_worth_a_retry() -> None:
    """librdkafka's local 'Unknown partition' comes from stale metadata after a broker restart;
    the next metadata refresh mends it, so it is JournalUnavailable, not a lasting error."""
    error = journal_error(KafkaError(KafkaError._UNKNOWN_PARTITION), "read offsets of t-0")
    assert isinstance(error, JournalUnavailable)
    assert journal_error(KafkaError(KafkaError._UNKNOWN_TOPIC), "x").retriable is False


class MetadataClient:
    """Stands in for the journal's offsets client: fails with `errors` in turn, then answers."""

    def __init__(self, errors: list[int]) -> None:
        self.errors = errors
        self.closed = False

    def get_watermark_offsets(self, _tp: TopicPartition, **_options: float) -> tuple[int, int]:
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))
        return 2, 7

    def poll(self, _timeout: float) -> None:
        return None

    def close(self) -> None:
        self.closed = True


def journal_with_clients(
    monkeypatch: pytest.MonkeyPatch, clients: Iterable[MetadataClient]
) -> KafkaJournal:
    journal = KafkaJournal("127.0.0.1:1", request_timeout_s=0.5)
    made = iter(clients)
    monkeypatch.setattr(kafka_journal, "RdConsumer", lambda _config: next(made))
    return journal


def test_stale_offsets_client_is_replaced_and_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """'Not leader' after a broker hang: the client is closed, new ones ask again until one is
    answered (a new leader takes a few seconds)."""
    stale = [MetadataClient([KafkaError.NOT_LEADER_FOR_PARTITION]) for _ in range(2)]
    fresh = MetadataClient([])
    journal = journal_with_clients(monkeypatch, [*stale, fresh])
    assert journal.latest_offset(TOPIC) == 7
    assert all(client.closed for client in stale)
    assert not fresh.closed


def test_stale_offsets_are_asked_until_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    code = KafkaError._UNKNOWN_PARTITION
    journal = journal_with_clients(monkeypatch, (MetadataClient([code]) for _ in iter(int, 1)))
    started = time.monotonic()
    with pytest.raises(JournalUnavailable):
        journal.latest_offset(TOPIC)
    assert 0.3 <= time.monotonic() - started < 2.0


def test_a_timeout_is_not_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker that does not answer would multiply the caller's wait: one try only."""
    hung = MetadataClient([KafkaError._TIMED_OUT])
    journal = journal_with_clients(monkeypatch, [hung])
    with pytest.raises(JournalUnavailable):
        journal.latest_offset(TOPIC)
    assert not hung.closed


class _FatalProducer:
    """A transactional producer that a successor fenced: its flush raises the fatal error."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config

    def init_transactions(self, timeout: float) -> None:
        pass

    def flush(self, timeout: float) -> int:
        raise KafkaException(
            KafkaError(KafkaError._FENCED, f"fenced by a newer instance ({timeout} s)", fatal=True)
        )


def test_a_fenced_writer_in_a_fatal_state_closes_without_an_error(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(kafka_fenced, "Producer", _FatalProducer)
    caplog.set_level(logging.INFO, logger="journal.kafka.fenced")
    source = KafkaJournal("127.0.0.1:1", request_timeout_s=0.5)
    writer = kafka_fenced.KafkaFencedWriter(source, "publish-events")
    writer.close()  # the distributed events close a fenced writer before they read back
    assert "closed in a fatal state" in caplog.text
