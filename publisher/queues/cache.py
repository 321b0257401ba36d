"""The queue cache: the packages of the package topic that queues are views of.

* A tail consumer keeps reading new packages from where the cache started (the latest offset
  at start), appending them to the newest segment.
* A head fetch reads an older range on demand, when a queue (or the event notifier) needs
  offsets below what the cache covers. Only one fetch runs at a time; concurrent callers wait
  for it and find their range covered.
* Entries live in one shared sorted structure (publisher/queues/entries.py); a subscriber's queue is
  a bisect into it, never a copy.
* ``recycle`` drops entries nobody needs any more (Sling recycles every 12 h).

Like Sling, only this agent's packages are cached, and TEST packages are not: they are
delivered to subscribers but are never queue items nor distributed events. A package record with
an out-of-range field (an unknown request type, a forged id or path) is a bad record
(publisher/bad_records.py): skipped and counted, and the tail consumer never stops on a record.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator

from journal.api import Consumer, Journal, Position, Record
from journal.content.rules import DEFAULT_LIMITS
from journal.errors import JournalError, UnknownMessageType
from journal.wire.messages import PackageMessage, ReqType, decode
from publisher.bad_records import BadRecords, check_count, check_enum, check_name
from publisher.errors import BadRecord, CacheFetchTimeout
from publisher.metrics import PublisherMetrics
from publisher.queues.entries import Entry, EntrySegment
from publisher.settings import DEFAULT_POLL_TIMEOUT_S
from runtime.errors import DecodeError
from runtime.ratelog import RateLimitedLog
from runtime.supervisor import SupervisedThread

log = logging.getLogger(__name__)

# After a failed tail poll (journal unreachable), wait this long before polling again.
TAIL_ERROR_BACKOFF_S = 1.0
# Records asked for per poll: large batches make a head fetch of 100,000 entries quick.
FETCH_BATCH_RECORDS = 5000
# One poll of a head fetch; the fetch as a whole is bounded by the fetch timeout.
FETCH_POLL_S = 0.5
# Longest path a cached entry keeps: the content rules refuse paths over this many UTF-8
# bytes, so a path with more characters is forged (characters: a cheap bound, no encoding).
MAX_PATH_CHARS = DEFAULT_LIMITS.max_path_bytes


class QueueCache:
    def __init__(
        self,
        journal: Journal,
        topic: str,
        agent_name: str,
        *,
        fetch_timeout_s: float,
        metrics: PublisherMetrics,
        poll_timeout_s: float = DEFAULT_POLL_TIMEOUT_S,
    ) -> None:
        self.journal = journal
        self.topic = topic
        self.agent_name = agent_name
        self.fetch_timeout_s = fetch_timeout_s
        # One poll of the tail consumer waits at most this long, so stop() returns promptly.
        self.poll_timeout_s = poll_timeout_s
        self.metrics = metrics
        self.counts: Counter[str] = Counter()
        self.bad_records = BadRecords(metrics.bad_records, log)
        self._skip_log = RateLimitedLog(log)
        self._lock = threading.Lock()
        self._fetch_lock = threading.Lock()
        self._segments: list[EntrySegment] = []
        self._covered_from: int | None = None
        self._next_offset = 0
        self._tail: Consumer | None = None
        self._stop = threading.Event()
        self.thread: SupervisedThread | None = None
        self._tail_runs = 0
        # ensure_all fetched the retained log since the last recycle: not again.
        self._all_fetched = False

    # ------------------------------------------------------------------ lifecycle
    def open(self, from_offset: int | None = None) -> None:
        """Cover the topic from ``from_offset`` (default: its latest offset) on."""
        start = self.journal.latest_offset(self.topic) if from_offset is None else from_offset
        self._tail = self.journal.consumer(self.topic, Position.at(start))
        with self._lock:
            self._covered_from = start
            self._next_offset = start

    def start(self) -> QueueCache:
        if self._tail is None:
            self.open()
        self.thread = SupervisedThread("queue-cache-tail", self._run, stop=self._stop).start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self.thread is not None:
            self.thread.join(timeout_s)
        if self._tail is not None:
            self._tail.close()
            self._tail = None

    def _run(self) -> None:
        """The tail loop (supervised: restarted after an exception)."""
        self._tail_runs += 1
        if self._tail_runs > 1 and self._tail is not None:
            # A restart: the failed batch was polled but maybe not (or partly) cached; read it
            # again from after the last record cached, so that nothing is lost or cached twice.
            with self._lock:
                resume = max(
                    [self._next_offset, *(s.last_offset + 1 for s in self._segments if len(s))]
                )
            self._tail.seek(0, resume)
        while not self._stop.is_set():
            try:
                self.poll_tail(self.poll_timeout_s)
            except JournalError as exc:
                self.counts["poll_error"] += 1
                log.warning("queue cache: tail poll of %s failed, retrying: %s", self.topic, exc)
                self._stop.wait(TAIL_ERROR_BACKOFF_S)

    def poll_tail(self, timeout_s: float) -> int:
        """Read one batch of new records into the cache; returns the number read."""
        assert self._tail is not None, "open() the cache first"
        records = self._tail.poll(timeout_s, FETCH_BATCH_RECORDS)
        position = self._tail.positions().get(0, self._next_offset)
        with self._lock:
            if not self._segments:
                self._segments.append(EntrySegment())
            segment = self._segments[-1]
            for record in records:
                message = self._package(record)
                if message is not None:
                    _append(segment, record.offset, message)
            self._next_offset = max(self._next_offset, position)
        if records:
            self.metrics.queue_cache_entries.set(self.size)
        return len(records)

    def _package(self, record: Record) -> PackageMessage | None:
        """The record's PackageMessage if it is one of this agent's cacheable packages (then
        ``_append`` cannot fail on it). Never raises on a record: a bad one is counted and
        skipped, or the tail would stop on it, or read it again after every restart."""
        try:
            message = decode(record.headers, record.value)
        except UnknownMessageType as exc:
            self._skip("unknown_type", record, exc)
            return None
        except DecodeError as exc:
            self._skip("undecodable", record, exc)
            return None
        try:
            if not isinstance(message, PackageMessage):
                return None  # PingMessage and other control records
            if message.pub_agent_name != self.agent_name or message.req_type == ReqType.TEST:
                return None
            _check(message)
        except Exception as exc:  # BadRecord, or a bug: either way this record only
            self.counts["bad_record"] += 1
            self.bad_records.report(record, exc)
            return None
        return message

    def _skip(self, reason: str, record: Record, exc: Exception) -> None:
        self.counts[reason] += 1
        self.metrics.skipped_records.labels(self.topic, reason).inc()
        self._skip_log.log(
            logging.WARNING,
            "queue cache: skipped %s-%d@%d: %s",
            record.topic,
            record.partition,
            record.offset,
            exc,
        )

    # ------------------------------------------------------------------ head fetch
    @property
    def covered_from(self) -> int:
        """Every package of offset >= this (and < ``next_offset``) is in the cache."""
        assert self._covered_from is not None, "open() the cache first"
        return self._covered_from

    @property
    def next_offset(self) -> int:
        """The next offset the tail consumer reads."""
        return self._next_offset

    def ensure_all(self) -> None:
        """Make the cache cover every retained record of the topic: one fetch between two
        recycles, whoever asks how often (a remote subscriber's sequence below the cache)."""
        if self._all_fetched:
            return
        self.ensure(self.journal.earliest_offset(self.topic))
        self._all_fetched = True

    def ensure(self, from_offset: int) -> None:
        """Make the cache cover ``from_offset`` on, fetching the missing older range."""
        if from_offset >= self.covered_from:
            return
        if not self._fetch_lock.acquire(timeout=self.fetch_timeout_s):
            raise CacheFetchTimeout(
                f"gave up waiting {self.fetch_timeout_s} s for another fetch of {self.topic} "
                f"(requested offset {from_offset}, cached from {self.covered_from})"
            )
        try:
            end = self.covered_from
            if from_offset < end:
                self._fetch(from_offset, end)
        finally:
            self._fetch_lock.release()

    def _fetch(self, from_offset: int, end: int) -> None:
        started = time.monotonic()
        start = max(from_offset, self.journal.earliest_offset(self.topic))
        segment = EntrySegment()
        read = 0
        if start < end:
            consumer = self.journal.consumer(self.topic, Position.at(start))
            deadline = started + self.fetch_timeout_s
            try:
                while consumer.positions().get(0, start) < end:
                    if time.monotonic() > deadline:
                        raise CacheFetchTimeout(
                            f"fetching offsets {start}..{end - 1} of {self.topic} took more "
                            f"than {self.fetch_timeout_s} s"
                        )
                    for record in consumer.poll(FETCH_POLL_S, FETCH_BATCH_RECORDS):
                        if record.offset >= end:
                            break
                        read += 1
                        message = self._package(record)
                        if message is not None:
                            _append(segment, record.offset, message)
            finally:
                consumer.close()
        with self._lock:
            if len(segment):
                self._segments.insert(0, segment)
            self._covered_from = from_offset
        self.metrics.queue_cache_fetch_count.inc()
        self.metrics.queue_cache_entries.set(self.size)
        log.info(
            "queue cache: fetched offsets %d..%d of %s (%d records, %d entries) in %.2f s",
            start,
            end - 1,
            self.topic,
            read,
            len(segment),
            time.monotonic() - started,
        )

    # ------------------------------------------------------------------ reading
    def _after(self, offset: int) -> Iterator[tuple[EntrySegment, int]]:
        """(segment, first index) of every segment holding entries with offset > ``offset``."""
        for segment in self._segments:
            if len(segment) and segment.last_offset > offset:
                yield segment, segment.index_after(offset)

    @property
    def size(self) -> int:
        with self._lock:
            return sum(len(s) for s in self._segments)

    def count_after(self, offset: int, upto: int | None = None) -> int:
        """Entries after ``offset`` (and at or before ``upto``: a bound read once from
        ``next_offset`` keeps the queues of one answer on one log end while the tail grows)."""
        with self._lock:
            return sum(
                max(0, _end(segment, upto) - start) for segment, start in self._after(offset)
            )

    def head_after(self, offset: int, upto: int | None = None) -> tuple[int, int] | None:
        """(offset, created ms) of the first entry after ``offset`` (and at or before
        ``upto``), without decoding it."""
        with self._lock:
            for segment, start in self._after(offset):
                if start >= _end(segment, upto):
                    return None
                return segment.offset_at(start), segment.created_at(start)
        return None

    def items_after(self, offset: int, skip: int = 0, limit: int | None = None) -> list[Entry]:
        out: list[Entry] = []
        with self._lock:
            for segment, start in self._after(offset):
                first = start + skip
                if first >= len(segment):
                    skip -= len(segment) - start
                    continue
                skip = 0
                stop = (
                    len(segment) if limit is None else min(len(segment), first + limit - len(out))
                )
                out.extend(segment.entry(i) for i in range(first, stop))
                if limit is not None and len(out) >= limit:
                    break
        return out

    def last_offset_upto(self, offset: int, count: int) -> int | None:
        """Offset of the ``count``-th entry after ``offset`` (or of the last one if fewer)."""
        last: int | None = None
        remaining = count
        with self._lock:
            for segment, start in self._after(offset):
                take = min(remaining, len(segment) - start)
                if take:
                    last = segment.offset_at(start + take - 1)
                    remaining -= take
                if remaining == 0:
                    break
        return last

    def entry_at(self, offset: int) -> Entry | None:
        with self._lock:
            for segment in self._segments:
                if len(segment) and segment.first_offset <= offset <= segment.last_offset:
                    index = segment.index_of(offset)
                    return segment.entry(index) if index is not None else None
        return None

    def numbers(self) -> tuple[int, int] | None:
        """(lowest, highest) package sequence number cached, None when none is."""
        with self._lock:
            ranges = [r for s in self._segments if (r := s.numbers) is not None]
        return (ranges[0][0], ranges[-1][1]) if ranges else None

    def offset_upto_number(self, number: int) -> int | None:
        """Offset of the cached package with the highest sequence number <= ``number``."""
        with self._lock:
            for segment in reversed(self._segments):
                offset = segment.offset_upto_number(number)
                if offset is not None:
                    return offset
        return None

    def offset_of_number(self, number: int) -> int | None:
        """Offset of the cached package numbered exactly ``number`` (None: not cached)."""
        with self._lock:
            for segment in self._segments:
                offset = segment.offset_of_number(number)
                if offset is not None:
                    return offset
        return None

    def number_upto_offset(self, offset: int) -> int:
        """The highest package sequence number cached at an offset <= ``offset`` (0: none)."""
        with self._lock:
            for segment in reversed(self._segments):
                if len(segment) and segment.first_offset <= offset:
                    number = segment.number_upto_offset(offset)
                    if number is not None:
                        return number
        return 0

    def clear_number(self, low: int, high: int) -> int:
        """The number a clear of the entries ``low < offset <= high`` carries: the highest one
        up to ``high`` when each of them is numbered, else 0 (a clear by offset: a package
        nobody numbered, a foreign writer's say, has no other name)."""
        with self._lock:
            for segment, start in self._after(low):
                end = _end(segment, high)
                if segment.numbered_between(start, end) < end - start:
                    return 0
        return self.number_upto_offset(high)

    def entries_between(self, low: int, high: int) -> list[Entry]:
        """Entries with ``low < offset <= high``, in offset order."""
        out: list[Entry] = []
        with self._lock:
            for segment, start in self._after(low):
                for i in range(start, len(segment)):
                    if segment.offset_at(i) > high:
                        return out
                    out.append(segment.entry(i))
        return out

    # ------------------------------------------------------------------ recycle
    def recycle(self, keep_from: int) -> int:
        """Drop entries of offset < ``keep_from`` and merge segments; returns entries dropped."""
        with self._lock:
            before = sum(len(s) for s in self._segments)
            merged = EntrySegment()
            for segment in self._segments:
                merged.extend(segment.drop_before(keep_from))
            self._segments = [merged]
            self._all_fetched = False
            if self._covered_from is not None:
                self._covered_from = max(self._covered_from, min(keep_from, self._next_offset))
            dropped = before - len(merged)
        self.metrics.queue_cache_entries.set(self.size)
        log.info("queue cache recycled: %d entries dropped, %d kept", dropped, before - dropped)
        return dropped


def _check(message: PackageMessage) -> None:
    """BadRecord if a field a queue item shows is out of range."""
    check_enum(ReqType, message.req_type, "req_type")
    check_name(message.pkg_id, "pkg_id")
    check_count(message.pkg_length, "pkg_length")
    check_count(message.created_ms, "created_ms")
    if len(message.paths) + len(message.deep_paths) > DEFAULT_LIMITS.max_roots:
        raise BadRecord(
            f"{len(message.paths) + len(message.deep_paths)} paths (at most "
            f"{DEFAULT_LIMITS.max_roots})"
        )
    for what, paths in (("paths", message.paths), ("deep_paths", message.deep_paths)):
        for path in paths:
            if not path or len(path) > MAX_PATH_CHARS:
                raise BadRecord(
                    f"{what} has a path of {len(path)} characters (1..{MAX_PATH_CHARS})"
                )


def _end(segment: EntrySegment, upto: int | None) -> int:
    """Index after the segment's last entry at or before ``upto`` (None: no bound)."""
    return len(segment) if upto is None else segment.index_after(upto)


def _append(segment: EntrySegment, offset: int, message: PackageMessage) -> None:
    segment.append(
        offset,
        message.pkg_id,
        int(message.req_type),
        message.paths,
        message.deep_paths,
        message.pkg_length,
        message.created_ms,
        message.sequence,
    )
