"""Embedded backend of the journal API: one SQLite file (WAL) shared by the processes of a
machine. Same semantics as Kafka: per-partition offsets that only grow (never reused, even
after retention deleted every record), retention by age, per-topic size limits.
"""

from __future__ import annotations

import json
import logging
import random
import sqlite3
import threading
import time
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path

from journal.api import (
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
from journal.leadership import Election, Leadership
from journal.sqlite.leadership import FileLockLeadership
from runtime.clock import now_ms

log = logging.getLogger(__name__)

# How long a writer waits for another process's write transaction before failing. Writes are
# short (one batch insert); 10 s only trips when a process holds the lock pathologically.
BUSY_TIMEOUT_MS = 10_000
# Queued async sends are committed in one transaction once this many are waiting: one fsync
# per batch instead of per record (a send() commits at once).
AUTO_FLUSH_RECORDS = 1000
# Retention runs at most this often per journal instance: deleting is cheap but need not run
# on every commit, and records outliving their retention by seconds is harmless.
RETENTION_CHECK_INTERVAL_S = 5.0
# A consumer without new records re-queries after this pause, doubling up to the maximum.
# SQLite has no cross-process notification; 2 ms first keeps a caught-up reader's latency low,
# 50 ms at most bounds the idle cost to 20 queries/s.
POLL_MIN_SLEEP_S = 0.002
POLL_MAX_SLEEP_S = 0.05

_SCHEMA = """
CREATE TABLE IF NOT EXISTS topics (
    name TEXT PRIMARY KEY,
    partitions INTEGER NOT NULL,
    retention_ms INTEGER,
    max_message_bytes INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS partitions (
    topic TEXT NOT NULL,
    partition INTEGER NOT NULL,
    next_offset INTEGER NOT NULL,
    PRIMARY KEY (topic, partition)
);
CREATE TABLE IF NOT EXISTS records (
    topic TEXT NOT NULL,
    partition INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    timestamp_ms INTEGER NOT NULL,
    key BLOB,
    headers TEXT NOT NULL,
    value BLOB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS records_position ON records (topic, partition, offset);
CREATE INDEX IF NOT EXISTS records_age ON records (topic, timestamp_ms);
CREATE TABLE IF NOT EXISTS fences (
    id TEXT PRIMARY KEY,
    epoch INTEGER NOT NULL
);
"""


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    conn.execute("PRAGMA journal_mode=WAL")
    # NORMAL in WAL mode: a committed transaction survives a crash of any process; only an
    # OS crash or power loss may lose the last commits (the same trade as Kafka's page cache).
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    return conn


class _Queued:
    __slots__ = ("headers", "key", "pending", "topic", "value")

    def __init__(
        self, topic: str, value: bytes, key: bytes | None, headers: str, pending: PendingSend
    ) -> None:
        self.topic = topic
        self.value = value
        self.key = key
        self.headers = headers
        self.pending = pending


class SqliteJournal(Journal):
    def __init__(self, path: str | Path, *, max_message_bytes: int = 1024 * 1024) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.default_max_message_bytes = max_message_bytes
        try:
            self._conn = _connect(self.path)
            self._conn.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise JournalUnavailable(f"cannot open journal database {self.path}: {exc}") from exc
        self._lock = threading.Lock()
        self._queue: list[_Queued] = []
        self._topics: dict[str, tuple[int, int | None, int]] = {}
        self._last_retention = 0.0

    def _topic(self, topic: str) -> tuple[int, int | None, int]:
        """(partitions, retention_ms, max_message_bytes) of an existing topic."""
        info = self._topics.get(topic)
        if info is None:
            with self._lock:
                row = self._conn.execute(
                    "SELECT partitions, retention_ms, max_message_bytes FROM topics WHERE name=?",
                    (topic,),
                ).fetchone()
            if row is None:
                raise UnknownTopic(f"topic {topic!r} does not exist in {self.path}")
            info = (int(row[0]), row[1], int(row[2]))
            self._topics[topic] = info
        return info

    def create_topics(self, specs: Sequence[TopicSpec]) -> None:
        with self._lock, self._transaction():
            for spec in specs:
                if spec.partitions < 1:
                    raise JournalError(f"topic {spec.name}: partitions must be >= 1")
                created = self._conn.execute(
                    "INSERT OR IGNORE INTO topics VALUES (?, ?, ?, ?)",
                    (spec.name, spec.partitions, spec.retention_ms, spec.max_message_bytes),
                ).rowcount
                if created:
                    self._conn.executemany(
                        "INSERT INTO partitions VALUES (?, ?, 0)",
                        [(spec.name, p) for p in range(spec.partitions)],
                    )
                    log.info("created topic %s (%d partitions)", spec.name, spec.partitions)

    def partitions(self, topic: str) -> int:
        return self._topic(topic)[0]

    def max_message_bytes(self, topic: str) -> int:
        return min(self._topic(topic)[2], self.default_max_message_bytes)

    def start_send(
        self,
        topic: str,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> PendingSend:
        item = self._queued(topic, value, key, headers)
        with self._lock:
            self._queue.append(item)
            full = len(self._queue) >= AUTO_FLUSH_RECORDS
        if full:
            self._flush()
        return item.pending

    def _queued(
        self, topic: str, value: bytes, key: bytes | None, headers: Mapping[str, str] | None
    ) -> _Queued:
        """A record checked for size, its headers encoded, ready for ``_append``."""
        self.check_size(topic, value, key, headers)
        encoded = json.dumps(dict(headers)) if headers else "{}"
        return _Queued(topic, value, key, encoded, PendingSend())

    def _refused(self, exc: sqlite3.Error) -> JournalUnavailable:
        return JournalUnavailable(f"journal database {self.path} refused a write: {exc}")

    def finish_send(self, pending: PendingSend) -> int:
        # One flush commits every record queued so far: concurrent senders share the commit.
        if not pending.done:
            try:
                self._flush()
            except JournalError as exc:
                pending.error = pending.error or exc
        return pending.result()

    def _flush(self) -> None:
        with self._lock:
            batch, self._queue = self._queue, []
            if not batch:
                return
            now = now_ms()
            try:
                with self._transaction():
                    self._append(batch, now)
            except sqlite3.Error as exc:
                error = self._refused(exc)
                for item in batch:
                    item.pending.offset = None
                    item.pending.error = error
                raise error from exc
            except JournalError as exc:
                for item in batch:
                    item.pending.offset = None
                    item.pending.error = exc
                raise
            self._expire(now)

    def _append(self, batch: list[_Queued], now_ms: int) -> None:
        next_offsets: dict[tuple[str, int], int] = {}
        rows = []
        for item in batch:
            partitions = self._topic(item.topic)[0]
            if item.key is not None:
                partition = zlib.crc32(item.key) % partitions
            else:
                partition = random.randrange(partitions) if partitions > 1 else 0
            slot = (item.topic, partition)
            offset = next_offsets.get(slot)
            if offset is None:
                row = self._conn.execute(
                    "SELECT next_offset FROM partitions WHERE topic=? AND partition=?", slot
                ).fetchone()
                if row is None:
                    raise UnknownTopic(f"topic {item.topic!r} does not exist in {self.path}")
                offset = int(row[0])
            next_offsets[slot] = offset + 1
            item.pending.partition = partition
            item.pending.offset = offset
            rows.append((item.topic, partition, offset, now_ms, item.key, item.headers, item.value))
        self._conn.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        self._conn.executemany(
            "UPDATE partitions SET next_offset=? WHERE topic=? AND partition=?",
            [(nxt, t, p) for (t, p), nxt in next_offsets.items()],
        )

    def _expire(self, now_ms: int) -> None:
        """Delete records older than their topic's retention (called under the lock)."""
        if time.monotonic() - self._last_retention < RETENTION_CHECK_INTERVAL_S:
            return
        self._last_retention = time.monotonic()
        try:
            with self._transaction():
                self._conn.execute(
                    "DELETE FROM records WHERE rowid IN (SELECT r.rowid FROM records r "
                    "JOIN topics t ON r.topic = t.name WHERE t.retention_ms IS NOT NULL "
                    "AND r.timestamp_ms < ? - t.retention_ms)",
                    (now_ms,),
                )
        except sqlite3.Error as exc:
            log.warning("journal retention on %s failed (retried later): %s", self.path, exc)

    def _transaction(self) -> _Transaction:
        return _Transaction(self._conn)

    def _offsets(self, topic: str, partition: int) -> tuple[int, int]:
        self._topic(topic)
        with self._lock:
            row = self._conn.execute(
                "SELECT (SELECT min(offset) FROM records WHERE topic=?1 AND partition=?2), "
                "next_offset FROM partitions WHERE topic=?1 AND partition=?2",
                (topic, partition),
            ).fetchone()
        if row is None:
            raise UnknownTopic(f"topic {topic!r} has no partition {partition}")
        latest = int(row[1])
        return (int(row[0]) if row[0] is not None else latest), latest

    def earliest_offset(self, topic: str, partition: int = 0) -> int:
        return self._offsets(topic, partition)[0]

    def latest_offset(self, topic: str, partition: int = 0) -> int:
        return self._offsets(topic, partition)[1]

    def consumer(
        self, topic: str, position: Position, partitions: Sequence[int] | None = None
    ) -> Consumer:
        count = self._topic(topic)[0]
        parts = list(partitions) if partitions is not None else list(range(count))
        start = {p: position.resolve(*self._offsets(topic, p)) for p in parts}
        return SqliteConsumer(self.path, topic, start)

    def fenced_writer(self, fence_id: str) -> FencedWriter:
        """The fence is an epoch per id in the database: opening a writer raises it, and a
        batch is inserted only in a transaction that finds the writer's epoch still current."""
        try:
            with self._lock, self._transaction():
                self._conn.execute(
                    "INSERT INTO fences VALUES (?, 1) ON CONFLICT(id) DO UPDATE SET epoch=epoch+1",
                    (fence_id,),
                )
                row = self._conn.execute(
                    "SELECT epoch FROM fences WHERE id=?", (fence_id,)
                ).fetchone()
        except sqlite3.Error as exc:
            raise self._refused(exc) from exc
        return _SqliteFencedWriter(self, fence_id, int(row[0]))

    def _write_fenced(
        self, fence_id: str, epoch: int, topic: str, records: Sequence[OutgoingRecord]
    ) -> list[int]:
        batch = [self._queued(topic, r.value, r.key, r.headers) for r in records]
        try:
            with self._lock, self._transaction():
                row = self._conn.execute(
                    "SELECT epoch FROM fences WHERE id=?", (fence_id,)
                ).fetchone()
                if row is None or int(row[0]) != epoch:
                    raise Fenced(f"writer {fence_id!r} (epoch {epoch}) was superseded")
                self._append(batch, now_ms())
        except sqlite3.Error as exc:
            raise self._refused(exc) from exc
        return [item.pending.result() for item in batch]

    def leadership(self, election: Election) -> Leadership:
        lock = self.path.with_name(f"{self.path.name}.{election.name}.leader.lock")
        return FileLockLeadership(lock, election.retry_s, election.thread_name)

    def close(self) -> None:
        try:
            self._flush()
        finally:
            self._conn.close()


class _SqliteFencedWriter(FencedWriter):
    def __init__(self, journal: SqliteJournal, fence_id: str, epoch: int) -> None:
        self.journal = journal
        self.fence_id = fence_id
        self.epoch = epoch

    def write(self, topic: str, records: Sequence[OutgoingRecord]) -> list[int]:
        return self.journal._write_fenced(self.fence_id, self.epoch, topic, records)

    def close(self) -> None:
        pass  # holds nothing: the fence lives in the database


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT / ROLLBACK: takes the write lock up front so concurrent
    writers queue on busy_timeout instead of failing on lock upgrade."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.conn.execute("ROLLBACK" if exc_type is not None else "COMMIT")


class SqliteConsumer(Consumer):
    def __init__(self, path: Path, topic: str, start: dict[int, int]) -> None:
        self.topic = topic
        self._conn = _connect(path)
        self._next = dict(start)

    def poll(self, timeout_s: float, max_records: int = 500) -> list[Record]:
        deadline = time.monotonic() + timeout_s
        sleep = POLL_MIN_SLEEP_S
        while True:
            records = self._read(max_records)
            remaining = deadline - time.monotonic()
            if records or remaining <= 0:
                return records
            time.sleep(min(sleep, remaining))
            sleep = min(sleep * 2, POLL_MAX_SLEEP_S)

    def _read(self, max_records: int) -> list[Record]:
        records: list[Record] = []
        for partition, start in self._next.items():
            try:
                rows = self._conn.execute(
                    "SELECT offset, timestamp_ms, key, headers, value FROM records "
                    "WHERE topic=? AND partition=? AND offset>=? ORDER BY offset LIMIT ?",
                    (self.topic, partition, start, max_records - len(records)),
                ).fetchall()
            except sqlite3.Error as exc:
                raise JournalUnavailable(f"journal database read failed: {exc}") from exc
            for offset, ts, key, headers, value in rows:
                records.append(
                    Record(self.topic, partition, offset, ts, key, json.loads(headers), value)
                )
            if rows:
                self._next[partition] = rows[-1][0] + 1
            if len(records) >= max_records:
                break
        return records

    def seek(self, partition: int, offset: int) -> None:
        self._next[partition] = offset

    def positions(self) -> dict[int, int]:
        return dict(self._next)

    def close(self) -> None:
        self._conn.close()
