"""Fenced writers on Kafka: one transactional producer per fence id. Opening one fences every
producer opened before it with the same id (the transaction coordinator bumps the epoch), so a
deposed writer can commit nothing more."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from journal.api import FencedWriter, OutgoingRecord
from journal.errors import Fenced, JournalError, JournalUnavailable

log = logging.getLogger(__name__)

# transaction.timeout.ms of a fenced writer: a writer that dies inside a batch holds back
# committed-only readers of that partition until its successor opens (which aborts the batch)
# or this passes. A batch is a few hundred milliseconds; 30 s also covers a broker failover.
# It stays below a consumer's stall check (STALL_CHECK_S + STALL_CONFIRM_S), so records held
# back by an open transaction are never taken for a stalled client.
TRANSACTION_TIMEOUT_MS = 30_000
# How long a failed write waits for its transaction's abort, at most.
ABORT_TIMEOUT_S = 1.0
# Errors by which the transaction coordinator says a newer writer took over the fence id.
FENCED_CODES = frozenset(
    {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
)


class ProducerSource(Protocol):
    """What a fenced writer needs from the Kafka journal that opens it (KafkaJournal): typed
    here so that this module need not import the journal module that imports it."""

    send_timeout_s: float
    request_timeout_s: float

    def producer_config(self) -> dict[str, Any]: ...

    def check_size(
        self, topic: str, value: bytes, key: bytes | None, headers: Mapping[str, str] | None
    ) -> None: ...


class _Delivery:
    """Records the offset of record ``index`` of a batch once the broker acknowledged it."""

    __slots__ = ("index", "offsets")

    def __init__(self, offsets: list[int | None], index: int) -> None:
        self.offsets = offsets
        self.index = index

    def __call__(self, err: KafkaError | None, message: Message) -> None:
        if err is None:
            self.offsets[self.index] = message.offset()


class KafkaFencedWriter(FencedWriter):
    def __init__(self, journal: ProducerSource, fence_id: str) -> None:
        self.journal = journal
        self.fence_id = fence_id
        self._where = f"Kafka at {journal.producer_config().get('bootstrap.servers')}"
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

    def write(self, topic: str, records: Sequence[OutgoingRecord]) -> list[int]:
        """Within the journal's send timeout; a writer whose write failed is not written with
        again (its successor's opening settles what it left open)."""
        for r in records:
            self.journal.check_size(topic, r.value, r.key, r.headers)
        deadline = time.monotonic() + self.journal.send_timeout_s
        producer = self._producer
        offsets: list[int | None] = [None] * len(records)
        try:
            producer.begin_transaction()
            for i, r in enumerate(records):
                self._produce(topic, r, _Delivery(offsets, i), deadline)
            # The commit flushes the batch and serves its delivery reports (the offsets).
            producer.commit_transaction(max(0.0, deadline - time.monotonic()))
        except KafkaException as exc:
            self._abort(deadline)
            raise self._error(exc.args[0], f"write to {topic}") from exc
        except BufferError as exc:
            self._abort(deadline)
            raise JournalUnavailable(
                f"writer {self.fence_id!r}: a batch of {len(records)} records does not fit "
                "the producer's queue, even emptied"
            ) from exc
        if None in offsets:
            producer.poll(0)
        found = [o for o in offsets if o is not None]
        if len(found) != len(records):
            raise JournalUnavailable(
                f"writer {self.fence_id!r}: a committed batch lacks its offsets"
            )
        return found

    def _produce(
        self, topic: str, r: OutgoingRecord, delivered: _Delivery, deadline: float
    ) -> None:
        headers: list[tuple[str, str | bytes | None]] | None = (
            list(r.headers.items()) if r.headers else None
        )
        try:
            self._producer.produce(topic, r.value, r.key, headers=headers, on_delivery=delivered)
        except BufferError:
            # Queue full: send what is queued (the transaction stays open), then try once more.
            self._producer.flush(max(0.0, deadline - time.monotonic()))
            self._producer.produce(topic, r.value, r.key, headers=headers, on_delivery=delivered)

    def _abort(self, deadline: float) -> None:
        """Best effort, briefly: an open transaction holds back committed-only readers of its
        partitions until it ends; the successor's opening aborts it anyway."""
        timeout = min(ABORT_TIMEOUT_S, max(0.0, deadline - time.monotonic()))
        try:
            self._producer.abort_transaction(timeout)
        except KafkaException as exc:
            log.info("writer %s: abort failed: %s", self.fence_id, exc)

    def _error(self, err: KafkaError, action: str) -> JournalError:
        if err.code() in FENCED_CODES:
            return Fenced(f"writer {self.fence_id!r} was superseded ({action}): {err.str()}")
        # A fatal error ends this producer, not the fence: a new writer goes on (a retry helps).
        state = "failed for good" if err.fatal() else "failed"
        return JournalUnavailable(
            f"writer {self.fence_id!r} on {self._where}: {action} {state}: {err.str()}"
        )

    def close(self) -> None:
        """Drop the producer: a fenced or idle one holds nothing worth waiting for. A producer
        that a successor fenced is in a fatal state, and its flush raises that (seen on the
        broker when the fencing came as it added a partition): nothing of it can be delivered,
        and the caller is closing it to go on."""
        try:
            self._producer.flush(0)
        except KafkaException as exc:
            log.info("writer %s: closed in a fatal state: %s", self.fence_id, exc)
