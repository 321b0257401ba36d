"""Kafka backend of the journal API, on confluent-kafka (librdkafka).

* Producer: idempotent with acks=all, so a retried send never duplicates or reorders records.
* Consumers: ``assign()`` at explicit offsets; no consumer-group commits — every agent owns its
  offsets (the subscriber stores them in its content store).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from confluent_kafka import (
    Consumer as RdConsumer,
)
from confluent_kafka import (
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # type: ignore[attr-defined]

from journal.api import (
    RECORD_OVERHEAD_BYTES,
    Consumer,
    FencedWriter,
    Journal,
    OutgoingRecord,
    PendingSend,
    Position,
    Record,
    TopicSpec,
)
from journal.errors import Fenced, JournalError, JournalUnavailable, UnknownTopic

log = logging.getLogger(__name__)

# How long a send may wait for its acknowledgement before failing with JournalUnavailable
# (librdkafka message.timeout.ms). 30 s rides out a broker restart or leader election yet
# answers a REST caller while it is still waiting.
DEFAULT_SEND_TIMEOUT_S = 30.0
# Admin and metadata calls (create topics, offsets): a reachable broker answers in
# milliseconds; 10 s leaves room for a slow start without hanging a caller for long.
DEFAULT_REQUEST_TIMEOUT_S = 10.0
# transaction.timeout.ms of a fenced writer: a writer that dies inside a batch holds back
# committed-only readers of that partition until its successor opens (which aborts the batch)
# or this passes. A batch is a few hundred milliseconds; 30 s also covers a broker failover.
# It stays below a consumer's stall check (STALL_CHECK_S + STALL_CONFIRM_S), so records held
# back by an open transaction are never taken for a stalled client.
TRANSACTION_TIMEOUT_MS = 30_000
# Errors by which the transaction coordinator says a newer writer took over the fence id.
FENCED_CODES = frozenset(
    {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
)
# linger.ms: wait up to 5 ms to batch records sent with send_async(); halves per-record
# overhead under load. A synchronous send() flushes, so it never waits for the linger.
PRODUCER_LINGER_MS = 5
# How long produce() waits in total for room in librdkafka's local queue before failing.
QUEUE_FULL_WAIT_S = 30.0
# Kafka's default segment.ms (7 days): segments are never kept open longer than that.
MAX_SEGMENT_MS = 7 * 24 * 3600 * 1000
# Flush step while waiting for one acknowledgement: bounds how late a timeout is noticed.
ACK_POLL_S = 0.05
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


class KafkaJournal(Journal):
    def __init__(
        self,
        bootstrap_servers: str,
        *,
        max_message_bytes: int = 1024 * 1024,
        send_timeout_s: float = DEFAULT_SEND_TIMEOUT_S,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        stall_check_s: float = STALL_CHECK_S,
        client_config: Mapping[str, str] | None = None,
    ) -> None:
        """``client_config``: extra librdkafka settings (security: SASL, TLS) for every client.

        ``stall_check_s``: quiet time after which a consumer checks that it is not stalled.
        """
        self.bootstrap_servers = bootstrap_servers
        self.stall_check_s = stall_check_s
        self.default_max_message_bytes = max_message_bytes
        self.send_timeout_s = send_timeout_s
        self.request_timeout_s = request_timeout_s
        self._where = f"Kafka at {bootstrap_servers}"
        self._common: dict[str, Any] = {"bootstrap.servers": bootstrap_servers}
        self._common.update(client_config or {})
        self._producer: Producer | None = None
        self._producer_lock = threading.Lock()
        self._admin: AdminClient | None = None
        self._meta: RdConsumer | None = None
        self._meta_lock = threading.Lock()
        self._limits: dict[str, int] = {}
        self._partitions: dict[str, int] = {}

    # ------------------------------------------------------------------ clients
    @property
    def producer(self) -> Producer:
        if self._producer is None:
            with self._producer_lock:
                if self._producer is None:
                    self._producer = Producer(self.producer_config())
        return self._producer

    def producer_config(self) -> dict[str, Any]:
        return {
            "error_cb": _log_client_error,
            **self._common,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": PRODUCER_LINGER_MS,
            "message.timeout.ms": int(self.send_timeout_s * 1000),
            # Aligned with the topics: create_topics gives every topic a broker limit >= this,
            # so the broker never refuses a batch we built.
            "message.max.bytes": self.default_max_message_bytes + RECORD_OVERHEAD_BYTES,
            # Same key -> same partition as Java clients (Sling interop).
            "partitioner": "murmur2_random",
        }

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            config: dict[str, Any] = {"error_cb": _log_client_error, **self._common}
            self._admin = AdminClient(config)
        return self._admin

    def _metadata_consumer(self) -> RdConsumer:
        if self._meta is None:
            self._meta = RdConsumer(_consumer_config(self._common))
        return self._meta

    # ------------------------------------------------------------------ topics
    def create_topics(self, specs: Sequence[TopicSpec]) -> None:
        new = []
        for spec in specs:
            config = {
                # Broker-side limit >= the producer's, so size refusals only ever come from
                # our own pre-send check (with a clear message).
                "max.message.bytes": str(
                    max(spec.max_message_bytes, self.default_max_message_bytes)
                    + RECORD_OVERHEAD_BYTES
                ),
            }
            if spec.retention_ms is not None:
                config["retention.ms"] = str(spec.retention_ms)
                # Kafka deletes whole closed segments only; a segment rolls after segment.ms
                # (default 7 days), so a shorter retention needs segments at most that long.
                config["segment.ms"] = str(min(spec.retention_ms, MAX_SEGMENT_MS))
            new.append(NewTopic(spec.name, num_partitions=spec.partitions, config=config))
        if not new:
            return
        futures = self.admin.create_topics(new, request_timeout=self.request_timeout_s)
        for spec in specs:
            try:
                futures[spec.name].result(timeout=self.request_timeout_s)
                log.info("created topic %s (%d partitions)", spec.name, spec.partitions)
            except KafkaException as exc:
                err = exc.args[0]
                if err.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise _journal_error(err, f"create topic {spec.name}", self._where) from exc
            except Exception as exc:  # concurrent.futures.TimeoutError
                raise JournalUnavailable(
                    f"Kafka at {self.bootstrap_servers} did not create topic {spec.name} "
                    f"within {self.request_timeout_s} s: {exc}"
                ) from exc
            self._limits[spec.name] = spec.max_message_bytes
            self._partitions[spec.name] = spec.partitions

    def partitions(self, topic: str) -> int:
        count = self._partitions.get(topic)
        if count is None:
            try:
                meta = self.admin.list_topics(topic, timeout=self.request_timeout_s)
            except KafkaException as exc:
                raise _journal_error(exc.args[0], f"describe topic {topic}", self._where) from exc
            info = meta.topics.get(topic)
            if info is None or info.error is not None or not info.partitions:
                raise UnknownTopic(f"topic {topic!r} does not exist at {self.bootstrap_servers}")
            count = len(info.partitions)
            self._partitions[topic] = count
        return count

    def max_message_bytes(self, topic: str) -> int:
        limit = self._limits.get(topic)
        if limit is None:
            limit = self._describe_limit(topic)
            self._limits[topic] = limit
        return limit

    def _describe_limit(self, topic: str) -> int:
        """A topic created elsewhere: its broker limit, capped by the producer's."""
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        try:
            configs = self.admin.describe_configs(
                [resource], request_timeout=self.request_timeout_s
            )
            entries = configs[resource].result(timeout=self.request_timeout_s)
            broker_limit = int(entries["max.message.bytes"].value) - RECORD_OVERHEAD_BYTES
        except Exception as exc:
            log.warning("could not read max.message.bytes of %s (%s); using default", topic, exc)
            return self.default_max_message_bytes
        return min(broker_limit, self.default_max_message_bytes)

    # ------------------------------------------------------------------ sending
    def send_async(
        self,
        topic: str,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> PendingSend:
        self.check_size(topic, value, key, headers)
        pending = _KafkaPending()
        producer = self._producer or self.producer
        deadline = 0.0
        while True:
            try:
                # No headers= keyword when there are none: produce() parses it per record.
                if headers:
                    producer.produce(
                        topic, value, key, headers=list(headers.items()), on_delivery=pending
                    )
                else:
                    producer.produce(topic, value, key, on_delivery=pending)
                break
            except BufferError:
                # Local queue full: serve delivery reports until there is room.
                now = time.monotonic()
                deadline = deadline or now + QUEUE_FULL_WAIT_S
                if now > deadline:
                    raise JournalUnavailable(
                        f"Kafka producer queue for {self.bootstrap_servers} stayed full for "
                        f"{QUEUE_FULL_WAIT_S} s"
                    ) from None
                producer.poll(ACK_POLL_S)
            except KafkaException as exc:
                raise _journal_error(exc.args[0], f"send to {topic}", self._where) from exc
        producer.poll(0)
        return pending

    def _wait(self, pending: PendingSend) -> None:
        producer = self.producer
        # librdkafka fails the record itself after message.timeout.ms; the extra second only
        # covers delivery-report latency.
        deadline = time.monotonic() + self.send_timeout_s + 1.0
        while not pending.done:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pending.error = JournalUnavailable(
                    f"no acknowledgement from Kafka at {self.bootstrap_servers} within "
                    f"{self.send_timeout_s} s"
                )
                return
            # flush() sends at once instead of waiting out linger.ms: a synchronous send pays
            # only the broker round trip, while bulk send_async() traffic still batches.
            producer.flush(min(remaining, ACK_POLL_S))

    def flush(self, timeout_s: float | None = None) -> None:
        if self._producer is None:
            return
        timeout = self.send_timeout_s + 1.0 if timeout_s is None else timeout_s
        remaining = self._producer.flush(timeout)
        if remaining:
            raise JournalUnavailable(
                f"{remaining} records not acknowledged by Kafka at {self.bootstrap_servers} "
                f"within {timeout} s"
            )

    # ------------------------------------------------------------------ offsets
    def _watermarks(
        self, topic: str, partition: int, timeout_s: float | None = None
    ) -> tuple[int, int]:
        with self._meta_lock:
            meta = self._metadata_consumer()
            try:
                low, high = meta.get_watermark_offsets(
                    TopicPartition(topic, partition),
                    timeout=self.request_timeout_s if timeout_s is None else timeout_s,
                )
            except KafkaException as exc:
                raise _journal_error(
                    exc.args[0], f"read offsets of {topic}-{partition}", self._where
                ) from exc
            finally:
                # This client never fetches: serve its queued error events here, or they pile
                # up for as long as a broker is down.
                meta.poll(0)
        return int(low), int(high)

    def _high_watermark(self, topic: str, partition: int) -> int:
        """The stall check's question, answered by a client that is not the one it checks."""
        return self._watermarks(topic, partition, STALL_QUERY_TIMEOUT_S)[1]

    def earliest_offset(self, topic: str, partition: int = 0) -> int:
        return self._watermarks(topic, partition)[0]

    def latest_offset(self, topic: str, partition: int = 0) -> int:
        return self._watermarks(topic, partition)[1]

    # ------------------------------------------------------------------ consuming
    def consumer(
        self, topic: str, position: Position, partitions: Sequence[int] | None = None
    ) -> Consumer:
        parts = list(partitions) if partitions is not None else list(range(self.partitions(topic)))
        assignment = []
        for p in parts:
            low, high = self._watermarks(topic, p)
            assignment.append(TopicPartition(topic, p, position.resolve(low, high)))
        return KafkaConsumer(
            topic,
            _consumer_config(self._common),
            assignment,
            self.stall_check_s,
            self._high_watermark,
        )

    def fenced_writer(self, fence_id: str) -> FencedWriter:
        """A transactional producer with ``transactional.id`` = ``fence_id``: its
        ``init_transactions`` bumps the id's producer epoch at the transaction coordinator,
        which fences older producers and aborts their open transaction. Readers read committed
        records only (librdkafka's default isolation), so an aborted batch is never read."""
        return _KafkaFencedWriter(self, fence_id)

    def close(self) -> None:
        if self._producer is not None:
            remaining = self._producer.flush(self.send_timeout_s)
            if remaining:
                log.error("closing Kafka journal with %d unacknowledged records", remaining)
            self._producer = None
        if self._meta is not None:
            self._meta.close()
            self._meta = None


class _KafkaFencedWriter(FencedWriter):
    def __init__(self, journal: KafkaJournal, fence_id: str) -> None:
        self.journal = journal
        self.fence_id = fence_id
        self._producer = Producer(
            {
                **journal.producer_config(),
                "transactional.id": fence_id,
                "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
            }
        )
        try:
            self._producer.init_transactions(journal.request_timeout_s)
        except KafkaException as exc:
            raise self._error(exc.args[0], "open") from exc

    def write(self, topic: str, records: Sequence[OutgoingRecord]) -> None:
        for r in records:
            self.journal.check_size(topic, r.value, r.key, r.headers)
        producer = self._producer
        try:
            producer.begin_transaction()
            for r in records:
                self._produce(topic, r)
            producer.commit_transaction(self.journal.send_timeout_s)
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if err.txn_requires_abort():
                self._abort()
            raise self._error(err, f"write to {topic}") from exc
        except BufferError as exc:
            self._abort()
            raise JournalUnavailable(
                f"writer {self.fence_id!r}: a batch of {len(records)} records does not fit "
                "the producer's queue, even emptied"
            ) from exc

    def _produce(self, topic: str, r: OutgoingRecord) -> None:
        headers: list[tuple[str, str | bytes | None]] | None = (
            list(r.headers.items()) if r.headers else None
        )
        try:
            self._producer.produce(topic, r.value, r.key, headers=headers)
        except BufferError:
            # Queue full: send what is queued (the transaction stays open), then try once more.
            self._producer.flush(self.journal.send_timeout_s)
            self._producer.produce(topic, r.value, r.key, headers=headers)

    def _abort(self) -> None:
        try:
            self._producer.abort_transaction(self.journal.send_timeout_s)
        except KafkaException as exc:  # the successor's init_transactions aborts it anyway
            log.warning("writer %s: abort failed: %s", self.fence_id, exc)

    def _error(self, err: KafkaError, action: str) -> JournalError:
        if err.code() in FENCED_CODES:
            return Fenced(f"writer {self.fence_id!r} was superseded ({action}): {err.str()}")
        if err.fatal():
            return JournalError(f"writer {self.fence_id!r}: {action} failed for good: {err.str()}")
        return JournalUnavailable(f"writer {self.fence_id!r}: {action} failed: {err.str()}")

    def close(self) -> None:
        self._producer.flush(0)  # a fenced or idle producer holds nothing worth waiting for


class _KafkaPending(PendingSend):
    """A PendingSend that is its own delivery report callback: one object per send, not two."""

    __slots__ = ()

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.error = _journal_error(err, f"send to {msg.topic()}")
        else:
            self.partition = msg.partition()
            self.offset = msg.offset()


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
                        raise _journal_error(err, f"consume {self.topic}", self._where)
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


def _consumer_config(common: Mapping[str, Any]) -> dict[str, Any]:
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
        "error_cb": _log_client_error,
    }


def _log_client_error(err: KafkaError) -> None:
    # Transport errors while a broker restarts are expected and retried by librdkafka.
    log.warning("kafka client: %s", err)


def _journal_error(err: KafkaError, action: str, where: str = "Kafka") -> JournalError:
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
    ):
        return JournalUnavailable(f"{action}: {where} unavailable: {err.str()}")
    return JournalError(f"{action}: {err.str()}")


__all__ = ["KafkaConsumer", "KafkaJournal", "KafkaRecord"]
