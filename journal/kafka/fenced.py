"""Fenced writers on Kafka: one transactional producer per fence id. Opening one fences every
producer opened before it with the same id (the transaction coordinator bumps the epoch), so a
deposed writer can commit nothing more."""

from __future__ import annotations

import logging
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
        for r in records:
            self.journal.check_size(topic, r.value, r.key, r.headers)
        producer = self._producer
        offsets: list[int | None] = [None] * len(records)
        try:
            producer.begin_transaction()
            for i, r in enumerate(records):
                self._produce(topic, r, _Delivery(offsets, i))
            # The delivery reports (the offsets) are served by flush, before the commit.
            unsent = producer.flush(self.journal.send_timeout_s)
            if unsent or None in offsets:
                self._abort()
                raise JournalUnavailable(
                    f"writer {self.fence_id!r}: {topic} did not acknowledge a batch of "
                    f"{len(records)} records within {self.journal.send_timeout_s} s"
                )
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
        return [o for o in offsets if o is not None]

    def _produce(self, topic: str, r: OutgoingRecord, delivered: _Delivery) -> None:
        headers: list[tuple[str, str | bytes | None]] | None = (
            list(r.headers.items()) if r.headers else None
        )
        try:
            self._producer.produce(topic, r.value, r.key, headers=headers, on_delivery=delivered)
        except BufferError:
            # Queue full: send what is queued (the transaction stays open), then try once more.
            self._producer.flush(self.journal.send_timeout_s)
            self._producer.produce(topic, r.value, r.key, headers=headers, on_delivery=delivered)

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
        """Drop the producer: a fenced or idle one holds nothing worth waiting for. A producer
        that a successor fenced is in a fatal state, and its flush raises that (seen on the
        broker when the fencing came as it added a partition): nothing of it can be delivered,
        and the caller is closing it to go on."""
        try:
            self._producer.flush(0)
        except KafkaException as exc:
            log.info("writer %s: closed in a fatal state: %s", self.fence_id, exc)
