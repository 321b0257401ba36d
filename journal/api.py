"""The backend-neutral journal API: topics, records, positions, sending and consuming.

Two backends implement it: Kafka (journal/kafka/) and an embedded SQLite file shared by the
processes of one machine (journal/sqlite/). Both give each topic partition monotonically
increasing offsets; ``latest_offset`` is the offset the next record will get (Kafka's high
watermark), ``earliest_offset`` the oldest one still retained.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Self

from journal.errors import MessageTooLarge
from journal.leadership import Election, Leadership

# Bytes a Kafka record adds around key, value and headers (record batch header of 61 bytes,
# per-record varints and attributes). The pre-send size check adds it so a record that passes
# our check is never refused by the producer or broker for size.
RECORD_OVERHEAD_BYTES = 512


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A topic to create. ``max_message_bytes`` is enforced before sending."""

    name: str
    partitions: int = 1
    retention_ms: int | None = None  # None: the backend's default (Kafka: broker default)
    max_message_bytes: int = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Position:
    """Where a consumer starts: an explicit offset, or earliest/latest shifted by ``delta``.

    ``Position.latest(-10)`` is "the last ten records"; ``Position.earliest(5)`` skips the
    first five retained records. Resolved positions are clamped into [earliest, latest].
    """

    anchor: Literal["offset", "earliest", "latest"]
    value: int = 0

    @classmethod
    def at(cls, offset: int) -> Position:
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        return cls("offset", offset)

    @classmethod
    def earliest(cls, delta: int = 0) -> Position:
        return cls("earliest", delta)

    @classmethod
    def latest(cls, delta: int = 0) -> Position:
        return cls("latest", delta)

    def resolve(self, earliest: int, latest: int) -> int:
        if self.anchor == "offset":
            target = self.value
        elif self.anchor == "earliest":
            target = earliest + self.value
        else:
            target = latest + self.value
        return min(max(target, earliest), latest)


class Record:
    """One record read from a topic partition (message info + payload). Read-only.

    The fields are properties so that a backend may return a subclass that reads them from its
    client's own message object on access instead of copying them up front (KafkaRecord in
    journal/kafka/journal.py); this class stores them.
    """

    __slots__ = ("_headers", "_key", "_offset", "_partition", "_timestamp_ms", "_topic", "_value")

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        timestamp_ms: int,
        key: bytes | None,
        headers: Mapping[str, str],
        value: bytes,
    ) -> None:
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._timestamp_ms = timestamp_ms
        self._key = key
        self._headers = headers
        self._value = value

    @property
    def topic(self) -> str:
        return self._topic

    @property
    def partition(self) -> int:
        return self._partition

    @property
    def offset(self) -> int:
        return self._offset

    @property
    def timestamp_ms(self) -> int:
        """The record's timestamp in ms since the epoch (when it was sent or appended)."""
        return self._timestamp_ms

    @property
    def key(self) -> bytes | None:
        return self._key

    @property
    def headers(self) -> Mapping[str, str]:
        return self._headers

    @property
    def value(self) -> bytes:
        return self._value

    def __repr__(self) -> str:
        return (
            f"Record({self.topic}-{self.partition}@{self.offset}, {len(self.value)} bytes, "
            f"headers={dict(self.headers)})"
        )


class PendingSend:
    """The outcome of an asynchronous send, known once the journal acknowledged it."""

    __slots__ = ("deadline", "error", "offset", "partition")

    def __init__(self, deadline: float | None = None) -> None:
        self.offset: int | None = None
        self.partition: int | None = None
        self.error: Exception | None = None
        # time.monotonic() by which a start_send's record is acknowledged or failed (None: the
        # journal's own send timeout counts from finish_send).
        self.deadline = deadline

    @property
    def done(self) -> bool:
        return self.offset is not None or self.error is not None

    def result(self) -> int:
        """The offset; raises the send's error. Only valid once ``done``."""
        if self.error is not None:
            raise self.error
        if self.offset is None:
            raise RuntimeError("send not acknowledged yet: call Journal.finish_send() first")
        return self.offset


class Consumer(abc.ABC):
    """Reads records of one topic from explicit positions; never commits anything."""

    @abc.abstractmethod
    def poll(self, timeout_s: float, max_records: int = 500) -> list[Record]:
        """Records available now, waiting up to ``timeout_s`` for the first one."""

    @abc.abstractmethod
    def seek(self, partition: int, offset: int) -> None:
        """Continue ``partition`` at ``offset``."""

    @abc.abstractmethod
    def positions(self) -> dict[int, int]:
        """Next offset to be read, per assigned partition."""

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True, slots=True)
class OutgoingRecord:
    """A record to write: its partition follows from the key, as for ``Journal.send``."""

    value: bytes
    key: bytes | None = None
    headers: Mapping[str, str] | None = None


class FencedWriter(abc.ABC):
    """Writes batches of records as the only holder of a fence id.

    Opening a writer (``Journal.fenced_writer``) fences every writer opened before it for the
    same id: their ``write`` raises ``Fenced`` from then on. A batch lands whole or not at all,
    so readers never see a partial batch, nor anything a fenced writer sent. Once
    ``fenced_writer`` returned, readers see every batch an earlier writer completed: the new
    holder can read back where its predecessor stopped and carry on, with no record written
    twice even when two processes both believe they should write.
    """

    @abc.abstractmethod
    def write(self, topic: str, records: Sequence[OutgoingRecord]) -> list[int]:
        """Write ``records`` as one batch; their offsets, in order. Raises Fenced when
        superseded, JournalError when the batch could not be written (then none of it is)."""

    @abc.abstractmethod
    def close(self) -> None: ...


class Journal(abc.ABC):
    """A persisted, partitioned, offset-addressed log of records."""

    #: Limit applied to topics this journal did not create and could not describe.
    default_max_message_bytes: int = 1024 * 1024

    @abc.abstractmethod
    def create_topics(self, specs: Sequence[TopicSpec]) -> None:
        """Create the topics that do not exist yet; existing ones are left as they are."""

    @abc.abstractmethod
    def partitions(self, topic: str) -> int:
        """Number of partitions; raises UnknownTopic."""

    @abc.abstractmethod
    def max_message_bytes(self, topic: str) -> int:
        """The topic's record size limit, as enforced before sending."""

    def send(
        self,
        topic: str,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> int:
        """Send one record and wait until it is durably on the log; returns its offset."""
        return self.finish_send(self.start_send(topic, value, key=key, headers=headers))

    @abc.abstractmethod
    def start_send(
        self,
        topic: str,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> PendingSend:
        """The first half of ``send``: queue the record, its send timeout starting now. Records
        queued one after the other on one partition reach the log in that order. Many records
        queued before the first ``finish_send`` are sent together (a bulk send)."""

    @abc.abstractmethod
    def finish_send(self, pending: PendingSend) -> int:
        """The second half of ``send``: wait until ``pending`` is durably on the log, at most
        until its send timeout passed; its offset, or raises its error (JournalUnavailable on a
        timeout: the record may still reach the log)."""

    @abc.abstractmethod
    def earliest_offset(self, topic: str, partition: int = 0) -> int: ...

    @abc.abstractmethod
    def latest_offset(self, topic: str, partition: int = 0) -> int:
        """The offset the next record of this partition will get."""

    @abc.abstractmethod
    def consumer(
        self, topic: str, position: Position, partitions: Sequence[int] | None = None
    ) -> Consumer:
        """A consumer of ``topic`` (all partitions unless given), each starting at ``position``."""

    @abc.abstractmethod
    def fenced_writer(self, fence_id: str) -> FencedWriter:
        """Open the writer for ``fence_id``, fencing the ones opened before (FencedWriter)."""

    @abc.abstractmethod
    def leadership(self, election: Election) -> Leadership:
        """This process's membership in ``election``, not yet started (``Leadership.start``)."""

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check_size(
        self, topic: str, value: bytes, key: bytes | None, headers: Mapping[str, str] | None
    ) -> None:
        """Refuse a record larger than the topic's limit, before anything is sent."""
        size = len(value) + RECORD_OVERHEAD_BYTES
        if key:
            size += len(key)
        if headers:
            size += sum(len(k) + len(v) for k, v in headers.items())
        limit = self.max_message_bytes(topic)
        if size > limit:
            raise MessageTooLarge(topic, size, limit)
