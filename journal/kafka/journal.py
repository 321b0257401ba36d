"""Kafka backend of the journal API, on confluent-kafka (librdkafka).

* Producer: idempotent with acks=all, so a retried send never duplicates or reorders records.
* Consumers (journal/kafka/consumer.py): ``assign()`` at explicit offsets; no consumer-group
  commits — every agent owns its offsets (the subscriber stores them in its content store).
* Fenced writers (journal/kafka/fenced.py): transactional producers, one per fence id.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
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
    PendingSend,
    Position,
    TopicSpec,
)
from journal.errors import JournalUnavailable, UnknownTopic
from journal.kafka.consumer import (
    STALL_CHECK_S,
    STALL_QUERY_TIMEOUT_S,
    KafkaConsumer,
    consumer_config,
)
from journal.kafka.errors import journal_error, log_client_error
from journal.kafka.fenced import KafkaFencedWriter
from journal.kafka.leadership import KafkaLeadership
from journal.leadership import Election, Leadership

log = logging.getLogger(__name__)

# How long a send may wait for its acknowledgement before failing with JournalUnavailable
# (librdkafka message.timeout.ms). 30 s rides out a broker restart or leader election yet
# answers a REST caller while it is still waiting.
DEFAULT_SEND_TIMEOUT_S = 30.0
# Admin and metadata calls (create topics, offsets): a reachable broker answers in
# milliseconds; 10 s leaves room for a slow start without hanging a caller for long.
DEFAULT_REQUEST_TIMEOUT_S = 10.0
# linger.ms: wait up to 5 ms to batch records queued with start_send(); halves per-record
# overhead under load. A synchronous send() flushes, so it never waits for the linger.
PRODUCER_LINGER_MS = 5
# How long produce() waits in total for room in librdkafka's local queue before failing.
QUEUE_FULL_WAIT_S = 30.0
# Kafka's default segment.ms (7 days): segments are never kept open longer than that.
MAX_SEGMENT_MS = 7 * 24 * 3600 * 1000
# Flush step while waiting for one acknowledgement: bounds how late a timeout is noticed.
ACK_POLL_S = 0.05
# Errors of a describe that mean the broker did not answer (not a refusal).
UNREACHABLE_CODES = frozenset(
    {KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}
)
# Offset queries failing with these mean the metadata client lost the partition, not that the
# topic is gone (create_topics and the readers' checks say that).
STALE_METADATA_CODES = frozenset(
    {
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
    }
)
# Backoff between offset queries answered from stale metadata.
STALE_RETRY_FIRST_S = 0.1
STALE_RETRY_MAX_S = 1.0
# Beyond send_timeout_s, how long a synchronous send waits for librdkafka's own timeout
# report: delivery-report latency only.
ACK_MARGIN_S = 1.0


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
        self._serving = threading.Lock()  # held by the sender serving delivery reports
        self._waiting: set[_KafkaPending] = set()  # senders in finish_send
        self._waiting_lock = threading.Lock()
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
            "error_cb": log_client_error,
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
            config: dict[str, Any] = {"error_cb": log_client_error, **self._common}
            self._admin = AdminClient(config)
        return self._admin

    def _metadata_consumer(self) -> RdConsumer:
        if self._meta is None:
            self._meta = RdConsumer(consumer_config(self._common))
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
                    raise journal_error(err, f"create topic {spec.name}", self._where) from exc
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
                raise journal_error(exc.args[0], f"describe topic {topic}", self._where) from exc
            info = meta.topics.get(topic)
            if info is None or info.error is not None or not info.partitions:
                raise UnknownTopic(f"topic {topic!r} does not exist at {self.bootstrap_servers}")
            count = len(info.partitions)
            self._partitions[topic] = count
        return count

    def max_message_bytes(self, topic: str, timeout_s: float | None = None) -> int:
        limit = self._limits.get(topic)
        if limit is None:
            limit = self._describe_limit(topic, timeout_s)
        return limit

    def _describe_limit(self, topic: str, timeout_s: float | None = None) -> int:
        """A topic created elsewhere: its broker limit, capped by the producer's (cached).
        JournalUnavailable when the broker does not answer within ``timeout_s`` (a send would
        not get through either); the producer's limit when it refuses to say (say, no
        DescribeConfigs permission)."""
        timeout = self.request_timeout_s if timeout_s is None else max(0.001, timeout_s)
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        try:
            configs = self.admin.describe_configs([resource], request_timeout=timeout)
            entries = configs[resource].result(timeout=timeout)
            broker_limit = int(entries["max.message.bytes"].value) - RECORD_OVERHEAD_BYTES
        except FutureTimeout:
            raise JournalUnavailable(
                f"Kafka at {self.bootstrap_servers} did not describe topic {topic} within "
                f"{timeout:.1f} s"
            ) from None
        except KafkaException as exc:
            error = exc.args[0]
            if error.code() in UNREACHABLE_CODES:
                raise journal_error(error, f"describe topic {topic}", self._where) from exc
            log.warning("could not read max.message.bytes of %s (%s); using default", topic, exc)
            limit = self.default_max_message_bytes
        except Exception as exc:
            log.warning("could not read max.message.bytes of %s (%s); using default", topic, exc)
            limit = self.default_max_message_bytes
        else:
            limit = min(broker_limit, self.default_max_message_bytes)
        self._limits[topic] = limit
        return limit

    # ------------------------------------------------------------------ sending
    def start_send(
        self,
        topic: str,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> PendingSend:
        """produce() the record: its ``finish_send`` answers (an offset or JournalUnavailable)
        within ``send_timeout_s`` of this call plus ACK_MARGIN_S, whatever the broker does
        (frozen, gone, slow); reading the topic's limit and waiting for room in the local queue
        come out of that time. The idempotent producer keeps the order of produce() calls
        within a partition, retries included."""
        return self._send(topic, value, key, headers, time.monotonic() + self.send_timeout_s)

    def _send(
        self,
        topic: str,
        value: bytes,
        key: bytes | None,
        headers: Mapping[str, str] | None,
        deadline: float | None,
    ) -> PendingSend:
        """produce() the record; with a ``deadline``, the size check and the wait for room in
        the local queue end by it (JournalUnavailable)."""
        if topic not in self._limits and deadline is not None:
            remaining = min(self.request_timeout_s, deadline - time.monotonic())
            self.max_message_bytes(topic, remaining)
        self.check_size(topic, value, key, headers)
        pending = _KafkaPending(deadline)
        producer = self._producer or self.producer
        queue_deadline = deadline
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
                queue_deadline = queue_deadline or now + QUEUE_FULL_WAIT_S
                if now > queue_deadline:
                    raise JournalUnavailable(
                        f"Kafka producer queue for {self.bootstrap_servers} stayed full: no "
                        f"room for the record in time (the broker does not take records)"
                    ) from None
                producer.poll(ACK_POLL_S)
            except KafkaException as exc:
                raise journal_error(exc.args[0], f"send to {topic}", self._where) from exc
        producer.poll(0)
        return pending

    def finish_send(self, pending: PendingSend) -> int:
        if not isinstance(pending, _KafkaPending):
            raise TypeError("finish_send takes a PendingSend of this journal's start_send")
        # librdkafka fails the record itself after message.timeout.ms; the margin only covers
        # delivery-report latency.
        timeout_at = pending.deadline
        if timeout_at is None:  # none given: the send timeout counts from now
            timeout_at = time.monotonic() + self.send_timeout_s
        deadline = timeout_at + ACK_MARGIN_S
        pending.acked = threading.Event()
        with self._waiting_lock:
            self._waiting.add(pending)
        served = False
        try:
            while not pending.done:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    pending.error = JournalUnavailable(
                        f"no acknowledgement from Kafka at {self.bootstrap_servers} within "
                        f"{self.send_timeout_s} s (the record may still reach the log)"
                    )
                    break
                served = self._serve(min(remaining, ACK_POLL_S))
                if not served:
                    pending.acked.wait(min(remaining, ACK_POLL_S))
                    pending.acked.clear()  # set by a hand-over: serve if nobody does
        finally:
            with self._waiting_lock:
                self._waiting.discard(pending)
                if served:
                    self._hand_over()
        return pending.result()

    def _serve(self, timeout_s: float) -> bool:
        """Serve the delivery reports of every sender for up to ``timeout_s``, unless another
        sender does: False then. One serves, the others wait for their own report (the callback
        wakes them): flush() returns only once the whole queue is done, so concurrent flushes
        held each sender until every other's record was acknowledged too."""
        if not self._serving.acquire(blocking=False):
            return False
        try:
            # flush() sends at once instead of waiting out linger.ms: a synchronous send pays
            # only the broker round trip, while bulk start_send() traffic still batches.
            self.producer.flush(timeout_s)
        finally:
            self._serving.release()
        return True

    def _hand_over(self) -> None:
        """The serving sender leaves: wake one still waiting, to serve from now on. (A sender
        that came later finds the serving lock free, as it waits after trying it.)"""
        for other in self._waiting:
            if not other.done and other.acked is not None:
                other.acked.set()
                return

    # ------------------------------------------------------------------ offsets
    def _watermarks(
        self, topic: str, partition: int, timeout_s: float | None = None
    ) -> tuple[int, int]:
        # Stale metadata (a leader move, a broker back from a hang) is asked again with a new
        # client until the timeout, as Java clients do: the client keeps failing at once until
        # it is replaced, and a new leader takes a few seconds to be elected.
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        pause = STALE_RETRY_FIRST_S
        while True:
            with self._meta_lock:
                meta = self._metadata_consumer()
                try:
                    low, high = meta.get_watermark_offsets(
                        TopicPartition(topic, partition),
                        timeout=max(deadline - time.monotonic(), ACK_POLL_S),
                    )
                    return int(low), int(high)
                except KafkaException as exc:
                    stale = exc.args[0].code() in STALE_METADATA_CODES
                    if stale:
                        self._meta = None
                        meta.close()
                    if not stale or time.monotonic() + pause >= deadline:
                        raise journal_error(
                            exc.args[0], f"read offsets of {topic}-{partition}", self._where
                        ) from exc
                finally:
                    # This client never fetches: serve its queued error events here, or they
                    # pile up for as long as a broker is down.
                    if self._meta is meta:
                        meta.poll(0)
            time.sleep(pause)
            pause = min(pause * 2, STALE_RETRY_MAX_S)

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
            consumer_config(self._common),
            assignment,
            self.stall_check_s,
            self._high_watermark,
        )

    def fenced_writer(self, fence_id: str) -> FencedWriter:
        """A transactional producer with ``transactional.id`` = ``fence_id``: its
        ``init_transactions`` bumps the id's producer epoch at the transaction coordinator,
        which fences older producers and aborts their open transaction. Readers read committed
        records only (librdkafka's default isolation), so an aborted batch is never read."""
        return KafkaFencedWriter(self, fence_id)

    def leadership(self, election: Election) -> Leadership:
        return KafkaLeadership(self, self._common, election)

    def close(self) -> None:
        if self._producer is not None:
            remaining = self._producer.flush(self.send_timeout_s)
            if remaining:
                log.error("closing Kafka journal with %d unacknowledged records", remaining)
            self._producer = None
        if self._meta is not None:
            self._meta.close()
            self._meta = None


class _KafkaPending(PendingSend):
    """A PendingSend that is its own delivery report callback: one object per send, not two."""

    __slots__ = ("acked",)

    def __init__(self, deadline: float | None) -> None:
        super().__init__(deadline)
        # Set by the report once a sender waits for it (finish_send): none for bulk sends.
        self.acked: threading.Event | None = None

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.error = journal_error(err, f"send to {msg.topic()}")
        else:
            self.partition = msg.partition()
            self.offset = msg.offset()
        if self.acked is not None:
            self.acked.set()


__all__ = ["KafkaJournal"]
