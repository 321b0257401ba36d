"""Sequence numbers: a record identity that survives copying.

Each package record (``PackageMessage.sequence``) and each command record
(``CommandMessage.sequence``) of a publisher agent carries a number that grows by one with each
record of that agent on that topic. It is inside the signed value, so a signed record copied to
the log's end still carries its old number: a subscriber that keeps the last number it applied
per agent refuses the copy (subscriber/bookkeeper/sequences.py). 0 means "not numbered" (older
publishers, Sling).

The number comes from the log, not from a local file: before its first send (and again when it
becomes leader, ``resync``) a ``Sequencer`` reads the topic's tail backwards, at most
``MAX_SCAN_RECORDS`` records, for the highest number its agent sent, and continues from there.
So it keeps growing across restarts, leader changes and instances that take turns.

A bound makes a hostile record harmless to the numbering: a topic that holds N records (the sum
of its partitions' end offsets) never carried a number above N, because numbering starts at 1
and each record of the agent adds one. A record claiming more is ignored (as is, with a signing
key, one the agent's own key did not sign). When no record of the agent is within reach (it sent
nothing for longer than the retention, or the scan stopped), numbering continues at N + 1, above
any number it ever gave: subscribers see a jump and report a gap, but never refuse a new record.

Two instances of one agent sending at the same moment each number from what they read: they can
give one number twice, or write a higher number before a lower one. A subscriber then refuses
the later-logged record as a replay (counted and logged, never silently). Distribution from
several instances therefore needs them to take turns (docs/security.md: replays).

A failed send may or may not have reached the log, so the number after it is read from the log
again: a record that never landed leaves no gap (a broker outage would otherwise put every
subscriber in SEQUENCE_GAP), and one that did is not numbered twice. Only a record that lands
after that read (librdkafka gave up on it while the broker was still writing it) is numbered
twice, and a subscriber refuses it as a replay, counted and logged. Waiting for the lock is
bounded too (``wait_s``): a request behind a send stuck on an unreachable broker fails as
unavailable (a retry helps) instead of queueing for one send timeout per request ahead of it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from google.protobuf.message import Message

from journal.api import Journal, Position
from journal.errors import JournalError, JournalUnavailable
from journal.wire.messages import TYPE_HEADER, CommandMessage, PackageMessage, decode, type_name
from journal.wire.signing import RecordVerifier, SignatureError
from runtime.errors import DecodeError

log = logging.getLogger(__name__)

# Records read back per step of the scan, and in all: a publisher's last record is usually the
# topic's last one, so one step finds it; the bound caps the start-up cost on a busy shared topic.
SCAN_STEP_RECORDS = 100
MAX_SCAN_RECORDS = 5000
# How long reading one step may take before the journal counts as unavailable (a retry helps).
SCAN_TIMEOUT_S = 30.0
POLL_S = 0.5
# How long a record waits for the send ahead of it (its journal's send timeout, by default
# Kafka's): beyond it the journal counts as unavailable.
DEFAULT_WAIT_S = 30.0

Numbered = PackageMessage | CommandMessage


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


class Sequencer:
    """Numbers the records one publisher agent sends to one topic (thread-safe)."""

    def __init__(
        self,
        journal: Journal,
        topic: str,
        agent: str,
        verifier: RecordVerifier | None = None,
        max_scan_records: int = MAX_SCAN_RECORDS,
        wait_s: float = DEFAULT_WAIT_S,
    ) -> None:
        """``verifier``: the agent's own public key when it signs, so that only its own records
        count when the tail is read; ``wait_s``: how long a number waits for the send ahead."""
        self.journal = journal
        self.topic = topic
        self.agent = agent
        self.verifier = verifier
        self.max_scan_records = max_scan_records
        self.wait_s = wait_s
        self._lock = threading.Lock()
        self._last: int | None = None  # the last number given; None: read the log first
        self._stale = False  # set by resync: read the log before the next number

    @property
    def last(self) -> int | None:
        return self._last

    def resync(self) -> None:
        """Read the log again before the next number (this instance became leader). Does not
        wait for a send in progress: the leadership thread calls it."""
        self._stale = True

    @contextmanager
    def numbering(self) -> Iterator[int]:
        """The next number, held until the block ends: the caller sends the record inside it,
        so that this instance writes its numbers in order. When the block raises, the number
        after it is read from the log (see the module docstring). JournalUnavailable when the
        send ahead holds the lock longer than ``wait_s``."""
        if not self._lock.acquire(timeout=self.wait_s):
            raise JournalUnavailable(
                f"{self.topic}: the record of {self.agent} ahead of this one waited over "
                f"{self.wait_s} s for the journal"
            )
        try:
            if self._last is None or self._stale:
                self._last, self._stale = self._resume(), False
            self._last += 1
            try:
                yield self._last
            except BaseException:
                self._stale = True
                raise
        finally:
            self._lock.release()

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
