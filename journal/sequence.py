"""Sequence numbers: a record identity that survives copying.

Each package record (``PackageMessage.sequence``) and each command record
(``CommandMessage.sequence``) of a publisher agent carries a number that grows by one with each
record of that agent on that topic. It is inside the signed value, so a signed record copied to
the log's end still carries its old number: a subscriber that keeps the last number it applied
per agent refuses the copy (subscriber/bookkeeper/sequences.py). 0 means "not numbered" (older
publishers, Sling).

The number comes from the log, not from a local file: before its first send (and again after
each opening of its writer, below) a ``Sequencer`` reads the topic's tail backwards, at most
``MAX_SCAN_RECORDS`` records, for the highest number its agent sent, and continues from there.
So it keeps growing across restarts, leader changes and instances that take turns.

A bound makes a hostile record harmless to the numbering: a topic that holds N records (the sum
of its partitions' end offsets) never carried a number above N, because numbering starts at 1
and each record of the agent adds one. A record claiming more is ignored (as is, with a signing
key, one the agent's own key did not sign). When no record of the agent is within reach (it sent
nothing for longer than the retention, or the scan stopped), numbering continues at N + 1, above
any number it ever gave: subscribers see a jump and report a gap, but never refuse a new record.

One writer numbers at a time, whatever the number of instances: a ``Sequencer`` writes through
the journal's fenced writer of its agent and topic (``Journal.fenced_writer``, a Kafka
transactional producer or the embedded journal's epoch). Opening that writer fences every one
opened before it and settles their batches (committed or aborted), and only then is the tail
read: the numbers continue from everything any earlier writer landed, and a writer that was
fenced (an instance paused, partitioned or deposed while it still believed it wrote) lands
nothing more. Its requests fail as unavailable (a retry helps), never land with a number
another writer gave. So two instances never give one number twice, and the log holds every
agent's numbers in their order. Which instance writes is the publisher's business
(publisher/replicas.py: the leader; the others forward to it); ``may_write`` says whether this
one may open the writer.

Numbering is serialized, writing is batched: under its lock a ``Sequencer`` gives the next
number and queues the record, then the first request to reach the writer writes every record
queued so far as one batch (one transaction), so concurrent requests share the broker's round
trips and still reach the log in the order of their numbers.

A batch that failed may or may not have landed, so the numbers after it are read from the log
again, after the writer was opened again (which settles the failed batch): a batch that never
landed leaves no gap, one that landed is not numbered twice. Every record queued behind a
failed batch fails with it (numbered after records that may not exist). Waiting, for the lock,
for the batch ahead and for the writer's opening, is bounded (``wait_s``): a request behind
sends stuck on an unreachable broker fails as unavailable instead of queueing for one send
timeout per request ahead of it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from google.protobuf.message import Message

from journal.api import FencedWriter, Journal, OutgoingRecord, Position
from journal.errors import Fenced, JournalError, JournalUnavailable, NotWriter, SignatureError
from journal.wire.messages import TYPE_HEADER, CommandMessage, PackageMessage, decode, type_name
from journal.wire.signing import RecordVerifier
from runtime.errors import DecodeError

log = logging.getLogger(__name__)

# Records read back per step of the scan, and in all: a publisher's last record is usually the
# topic's last one, so one step finds it; the bound caps the start-up cost on a busy shared topic.
SCAN_STEP_RECORDS = 100
MAX_SCAN_RECORDS = 5000
# How long reading one step may take before the journal counts as unavailable (a retry helps).
SCAN_TIMEOUT_S = 30.0
POLL_S = 0.5
# How long a record waits for its number (the lock, and after a failed send the records in
# flight): beyond it the journal counts as unavailable. Kafka's send timeout by default.
DEFAULT_WAIT_S = 30.0

Numbered = PackageMessage | CommandMessage
# Makes the record for a number: its value and headers (signed over the number).
Encoder = Callable[[int], tuple[bytes, Mapping[str, str]]]


def record_sequence(message: Message) -> int:
    """The sequence number of a package or command message (0: not numbered)."""
    if isinstance(message, PackageMessage | CommandMessage):
        return int(message.sequence)
    return 0


def _agent(message: Message) -> str:
    return (
        str(message.pub_agent_name) if isinstance(message, PackageMessage | CommandMessage) else ""
    )


def highest_sequence(
    journal: Journal,
    topic: str,
    agent: str,
    verifier: RecordVerifier | None = None,
    max_records: int = MAX_SCAN_RECORDS,
) -> tuple[int | None, int]:
    """(the highest number ``agent`` gave on ``topic`` within the last ``max_records`` records,
    or None when none is; the topic's record count N, which bounds every number). Records above
    N, undecodable ones and, with ``verifier``, ones its keys did not sign are ignored."""
    partitions = journal.partitions(topic)
    ranges = [
        (journal.earliest_offset(topic, p), journal.latest_offset(topic, p))
        for p in range(partitions)
    ]
    bound = sum(end for _, end in ranges)
    budget = max(1, max_records // partitions)
    best: int | None = None
    for partition, (earliest, end) in enumerate(ranges):
        stop = end
        read = 0
        while stop > earliest and read < budget:
            step = min(SCAN_STEP_RECORDS, budget - read, stop - earliest)
            found = _scan(journal, topic, partition, stop - step, stop, agent, bound, verifier)
            read += step
            stop -= step
            if found is not None:
                best = found if best is None else max(best, found)
                break
    return best, bound


def _scan(
    journal: Journal,
    topic: str,
    partition: int,
    start: int,
    stop: int,
    agent: str,
    bound: int,
    verifier: RecordVerifier | None,
) -> int | None:
    best: int | None = None
    wanted = type_name(PackageMessage), type_name(CommandMessage)
    deadline = time.monotonic() + SCAN_TIMEOUT_S
    with journal.consumer(topic, Position.at(start), [partition]) as consumer:
        while consumer.positions().get(partition, stop) < stop:
            if time.monotonic() > deadline:
                raise JournalUnavailable(
                    f"reading {topic}-{partition} offsets {start}..{stop - 1} for the last "
                    f"sequence of {agent!r} took over {SCAN_TIMEOUT_S} s"
                )
            for record in consumer.poll(POLL_S):
                if record.offset >= stop or record.headers.get(TYPE_HEADER) not in wanted:
                    continue
                try:
                    message = decode(record.headers, record.value)
                    if verifier is not None:
                        verifier.verify(topic, record.headers, record.value)
                except (DecodeError, JournalError, SignatureError):
                    continue
                number = record_sequence(message)
                if _agent(message) != agent or number <= 0:
                    continue
                if number > bound:
                    log.warning(
                        "%s-%d@%d claims sequence %d of %s, above the %d records the topic "
                        "ever held: ignored (not written by this agent)",
                        topic,
                        partition,
                        record.offset,
                        number,
                        agent,
                        bound,
                    )
                    continue
                best = number if best is None else max(best, number)
    return best


@dataclass
class _Queued:
    """One numbered record waiting for its batch; ``done`` once the batch landed or failed."""

    number: int
    record: OutgoingRecord
    done: threading.Event = field(default_factory=threading.Event)
    offset: int | None = None
    error: BaseException | None = None

    def settle(self, offset: int | None, error: BaseException | None) -> None:
        self.offset, self.error = offset, error
        self.done.set()


def fence_id(agent: str, topic: str) -> str:
    """The fence (on Kafka the transactional id) of ``agent``'s numbered records on ``topic``."""
    return f"scd-sequence-{agent}-{topic}"


class Sequencer:
    """Numbers and writes the records one publisher agent sends to one topic (thread-safe)."""

    def __init__(
        self,
        journal: Journal,
        topic: str,
        agent: str,
        verifier: RecordVerifier | None = None,
        max_scan_records: int = MAX_SCAN_RECORDS,
        wait_s: float = DEFAULT_WAIT_S,
        may_write: Callable[[], bool] = lambda: True,
    ) -> None:
        """``verifier``: the agent's own public key when it signs, so that only its own records
        count when the tail is read; ``wait_s``: how long a record waits for its number and
        its batch; ``may_write``: whether this instance may open the agent's writer now."""
        self.journal = journal
        self.topic = topic
        self.agent = agent
        self.verifier = verifier
        self.max_scan_records = max_scan_records
        self.wait_s = wait_s
        self.may_write = may_write
        self.fence_id = fence_id(agent, topic)
        # Lock order: _write_lock before _lock. _lock: numbering and the queue; _write_lock:
        # one batch (or one opening of the writer) at a time.
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._writer: FencedWriter | None = None
        self._last: int | None = None  # the last number given; None: open and read the log
        self._queued: list[_Queued] = []
        # reset() counts up without a lock; numbers continue only from a writer opened in the
        # current count (an opening under way when reset() came is opened again).
        self._resets = 0
        self._opened_at = 0

    @property
    def last(self) -> int | None:
        return self._last

    def reset(self) -> None:
        """Open the writer and read the log again before the next number (this instance
        became, or stopped being, the one that writes). Waits for nothing, not even a writer
        being opened against an unresponsive journal: the leader election calls it from the
        thread that keeps this instance in the election."""
        self._resets += 1

    def close(self) -> None:
        with self._write_lock, self._lock:
            self._last = None
            self._close_writer()

    def send(self, encode: Encoder, key: bytes | None = None) -> int:
        """Number, encode (``encode(number)``) and write one record; its offset once it is on
        the log. Raises what the write raised (then the numbers after it are read from the log
        again), NotWriter when this instance may not write, JournalUnavailable when the record
        waited over ``wait_s``."""
        deadline = time.monotonic() + self.wait_s
        queued = self._number(encode, key, deadline)
        self._write(queued, deadline)
        if queued.error is not None:
            raise queued.error
        assert queued.offset is not None
        return queued.offset

    def _number(self, encode: Encoder, key: bytes | None, deadline: float) -> _Queued:
        while True:
            with self._locked(self._lock, deadline):
                if self._last is not None and self._opened_at == self._resets:
                    number = self._last + 1
                    value, headers = encode(number)
                    queued = _Queued(number, OutgoingRecord(value, key, headers))
                    self._queued.append(queued)
                    self._last = number
                    return queued
            with self._locked(self._write_lock, deadline), self._locked(self._lock, deadline):
                if self._last is None or self._opened_at != self._resets:
                    self._open()

    def _open(self) -> None:
        """A new writer (fencing and settling every earlier one), then the tail read (under
        both locks)."""
        resets = self._resets
        # Records numbered before a reset() would continue numbers the new writer reads again.
        stale, self._queued = self._queued, []
        for q in stale:
            q.settle(None, JournalUnavailable(f"{self.topic}: the writer of {self.agent} changed"))
        if not self.may_write():
            raise NotWriter(f"{self.topic}: another instance of {self.agent} writes its records")
        self._close_writer()
        self._last = None
        self._writer = self.journal.fenced_writer(self.fence_id)
        self._last = self._resume()
        self._opened_at = resets

    def _write(self, queued: _Queued, deadline: float) -> None:
        """Write every record queued so far as one batch, unless an earlier batch took
        ``queued`` along."""
        try:
            with self._locked(self._write_lock, deadline):
                if not queued.done.is_set():
                    self._write_queued()
        except JournalUnavailable as exc:
            if not self._withdraw(queued, exc):
                # Another thread's batch took it along and is being written: only that write
                # knows whether it lands, and it settles every record it took, within the
                # journal's send timeout. A refusal now could be a record on the log.
                queued.done.wait()

    def _write_queued(self) -> None:
        """Under ``_write_lock``: one batch of everything queued."""
        with self._lock:
            batch, self._queued = self._queued, []
            writer = self._writer
        assert writer is not None, "a record is queued only with a writer open"
        try:
            offsets = writer.write(self.topic, [q.record for q in batch])
        except BaseException as exc:
            error: BaseException = exc
            with self._lock:
                behind, self._queued = self._queued, []
                self._last = None
                if isinstance(exc, Fenced):
                    self._close_writer()
                    # Another instance opened the writer since: the request may go there.
                    error = NotWriter(f"{self.topic}: another instance writes now ({exc})")
                    error.__cause__ = exc
            for q in batch + behind:
                q.settle(None, error)
            return
        for q, offset in zip(batch, offsets, strict=True):
            q.settle(offset, None)

    def _withdraw(self, queued: _Queued, error: JournalUnavailable) -> bool:
        """``queued`` gave up waiting for the batch ahead: it and the records behind it leave
        the queue (numbered after it), and the next number is read from the log again. False
        when it is in a batch being written, which settles it."""
        with self._lock:
            if queued.done.is_set():
                return True
            if queued not in self._queued:
                return False
            index = self._queued.index(queued)
            withdrawn, self._queued = self._queued[index:], self._queued[:index]
            self._last = None
        for q in withdrawn:
            q.settle(None, error)
        return True

    def _close_writer(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    @contextmanager
    def _locked(self, lock: threading.Lock, deadline: float) -> Iterator[None]:
        if not lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise JournalUnavailable(
                f"{self.topic}: the record of {self.agent} ahead of this one waited over "
                f"{self.wait_s} s for the journal"
            )
        try:
            yield
        finally:
            lock.release()

    def _resume(self) -> int:
        found, bound = highest_sequence(
            self.journal, self.topic, self.agent, self.verifier, self.max_scan_records
        )
        if found is not None:
            log.info("%s: %s sequence continues after %d", self.topic, self.agent, found)
            return found
        log.info(
            "%s: no numbered record of %s within the last %d records: numbering continues "
            "after %d (the topic's record count)",
            self.topic,
            self.agent,
            self.max_scan_records,
            bound,
        )
        return bound
