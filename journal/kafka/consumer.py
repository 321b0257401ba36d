"""Reading a Kafka topic for the journal API: records as light views of librdkafka's messages,
and consumers that own their positions (``assign()``, nothing committed) and replace a client
that silently stopped fetching."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from journal.api import Consumer, Record
from journal.errors import JournalError
from journal.kafka.errors import journal_error, log_client_error

log = logging.getLogger(__name__)

# The headers of every record that has none: one shared read-only mapping instead of a new
# empty dict per record.
NO_HEADERS: Mapping[str, str] = MappingProxyType({})
# A consumer that has received nothing for this long asks the broker whether records wait
# beyond its positions; if they do, its librdkafka client is replaced. librdkafka's assign()
# consumers can stop fetching for good after a broker restart without reporting any error
# (librdkafka issue 5153); the stalled client may not answer offset queries either, so the
# question goes through the journal's own metadata client. 30 s is far above a healthy fetch
# round trip (fetch.wait.max.ms is 500 ms) and bounds such a stall to well under a minute.
STALL_CHECK_S = 30.0
# Records found waiting are only a suspicion: a client that lost the broker reconnects with a
# back-off of up to librdkafka's reconnect.backoff.max.ms (10 s), so it may be about to fetch.
# The client is replaced when the records still wait this much later (or one check interval,
# if that is shorter) and it has fetched nothing in between.
STALL_CONFIRM_S = 10.0
# How long the stall check waits for the broker's offsets: short, as it runs inside poll();
# a broker that does not answer in time is simply checked again later.
STALL_QUERY_TIMEOUT_S = 2.0


class KafkaRecord(Record):
    """A record read by KafkaConsumer: a view of confluent-kafka's ``Message``.

    Copying seven fields out of every message into a Record, and decoding its headers into a
    dict whether or not anyone reads them, cost the consuming thread nearly as much CPU per
    record as confluent-kafka's own consume() (bench/journal_throughput.py). This reads each
    field from the message on access; the headers are decoded on first access and kept.
    Record's own slots stay unset. A consumed message always has a topic, partition and
    offset: the client's type stubs make them optional only for messages built by hand.
    """

    __slots__ = ("_decoded", "_msg")

    def __init__(self, msg: Message) -> None:
        self._msg = msg
        self._decoded: Mapping[str, str] | None = None

    @property
    def topic(self) -> str:
        return self._msg.topic()  # type: ignore[return-value]

    @property
    def partition(self) -> int:
        return self._msg.partition()  # type: ignore[return-value]

    @property
    def offset(self) -> int:
        return self._msg.offset()  # type: ignore[return-value]

    @property
    def timestamp_ms(self) -> int:
        return self._msg.timestamp()[1]

    @property
    def key(self) -> bytes | None:
        return self._msg.key()

    @property
    def headers(self) -> Mapping[str, str]:
        headers = self._decoded
        if headers is None:
            # A consumed message's headers are a list of (name, bytes | None).
            raw: list[tuple[str, bytes | None]] | None = self._msg.headers()  # type: ignore[assignment]
            headers = self._decoded = decode_headers(raw)
        return headers

    @property
    def value(self) -> bytes:
        return self._msg.value() or b""


def decode_headers(raw: Sequence[tuple[str, bytes | None]] | None) -> Mapping[str, str]:
    """Kafka header values are bytes (or None): UTF-8 text here, undecodable bytes replaced."""
    if not raw:
        return NO_HEADERS
    headers: dict[str, str] = {}
    # A plain loop: a dict comprehension's extra frame (Python 3.11) costs a third more here.
    for name, value in raw:
        headers[name] = value.decode("utf-8", "replace") if value is not None else ""
    return headers


class KafkaConsumer(Consumer):
    def __init__(
        self,
        topic: str,
        config: dict[str, Any],
        assignment: list[TopicPartition],
        stall_check_s: float,
        high_watermark: Callable[[str, int], int],
    ):
        """``high_watermark(topic, partition)``: the end offset as the broker reports it,
        raising JournalError when the broker does not answer."""
        self.topic = topic
        self._where = f"Kafka at {config.get('bootstrap.servers')}"
        self._config = config
        self._next = {tp.partition: tp.offset for tp in assignment}
        self._consumer = self._client()
        self._stall_check_s = stall_check_s
        self._high_watermark = high_watermark
        self._quiet_since = time.monotonic()
        # Positions at which records were found waiting by the last check, awaiting confirmation.
        self._suspected: dict[int, int] | None = None
        #: How many times a stalled librdkafka client was replaced (observable by tests).
        self.restarts = 0

    def poll(self, timeout_s: float, max_records: int = 500) -> list[Record]:
        # consume() waits until it has max_records or the timeout passed: ask only for what is
        # queued, and when nothing is, wait for one record and take what came with it.
        messages = self._consumer.consume(num_messages=max_records, timeout=0)
        if not messages:
            first = self._consumer.poll(timeout_s)
            if first is not None:
                messages = [first]
                if max_records > 1:
                    more = self._consumer.consume(num_messages=max_records - 1, timeout=0)
                    messages.extend(more)
        if messages:
            # Error events (not records) are rare: find them in one pass, handle them apart.
            failed = [msg for msg in messages if msg.error() is not None]
            if failed:
                for msg in failed:
                    err: KafkaError = msg.error()  # type: ignore[assignment]
                    if err.fatal():
                        # Before the positions move: the records of this batch are read again
                        # by a consumer started at positions().
                        raise journal_error(err, f"consume {self.topic}", self._where)
                    log.warning("consumer of %s: %s", self.topic, err)
                messages = [msg for msg in messages if msg.error() is None]
        if messages:
            self._advance(messages)
            self._quiet_since = time.monotonic()
            return list(map(KafkaRecord, messages))
        self._skip_control_records()
        # Only records count as progress: a client that reports errors and never fetches is
        # as stalled as a silent one.
        if time.monotonic() - self._quiet_since >= self._stall_check_s:
            self._check_stall()
        return []

    def _skip_control_records(self) -> None:
        """Move positions past what librdkafka consumed without returning it: transaction
        markers and aborted records (FencedWriter), which take offsets of their own."""
        try:
            consumed = self._consumer.position(self._assignment())
        except KafkaException:
            return  # positions stay where the last records put them
        for tp in consumed:
            if tp.offset > self._next.get(tp.partition, tp.offset):
                self._next[tp.partition] = tp.offset

    def _check_stall(self) -> None:
        """Replace the librdkafka client if records wait beyond positions it does not fetch."""
        self._quiet_since = time.monotonic()
        waiting = {}
        for partition, position in self._next.items():
            try:
                high = self._high_watermark(self.topic, partition)
            except JournalError as exc:
                log.info(
                    "consumer of %s received nothing for %.0f s; cannot check for a stall: %s",
                    self.topic,
                    self._stall_check_s,
                    exc,
                )
                return  # nothing to decide before the broker answers
            if high > position:
                waiting[partition] = high - position
        if not waiting:
            self._suspected = None
            return
        if self._suspected != self._next:  # first sight: give the client time to fetch them
            self._suspected = dict(self._next)
            self._quiet_since -= self._stall_check_s - min(STALL_CONFIRM_S, self._stall_check_s)
            return
        self._suspected = None
        log.warning(
            "consumer of %s fetched nothing though records wait (per partition: %s);"
            " restarting its Kafka client at positions %s",
            self.topic,
            waiting,
            self._next,
        )
        stalled, self._consumer = self._consumer, self._client()
        # Closed aside: closing a client in an unknown state must not hold up the new one.
        threading.Thread(
            target=stalled.close, name=f"close-stalled-{self.topic}", daemon=True
        ).start()
        self.restarts += 1

    def _client(self) -> RdConsumer:
        """A librdkafka consumer assigned at the current positions."""
        client = RdConsumer(self._config)
        client.assign(self._assignment())
        return client

    def _assignment(self) -> list[TopicPartition]:
        return [TopicPartition(self.topic, p, o) for p, o in self._next.items()]

    def _advance(self, messages: list[Message]) -> None:
        """Move each partition's position past its last record in ``messages``.

        The records of one partition come in offset order, so scanning from the end the first
        one seen of a partition is its last; the scan stops once every assigned partition was
        seen (at the first record for a single partition).
        """
        positions = self._next
        seen: set[int] = set()
        for msg in reversed(messages):
            partition: int = msg.partition()  # type: ignore[assignment]
            if partition not in seen:
                seen.add(partition)
                positions[partition] = msg.offset() + 1  # type: ignore[operator]
                if len(seen) >= len(positions):
                    break

    def seek(self, partition: int, offset: int) -> None:
        self._next[partition] = offset
        self._consumer.assign(self._assignment())

    def positions(self) -> dict[int, int]:
        return dict(self._next)

    def close(self) -> None:
        self._consumer.close()


def consumer_config(common: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **common,
        # A group id is mandatory in librdkafka even with assign(); nothing is ever committed.
        "group.id": f"scd-reader-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # A position deleted by retention restarts at the oldest retained record, as a log
        # reader expects; the gap is visible through the record offsets.
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
        "error_cb": log_client_error,
    }
