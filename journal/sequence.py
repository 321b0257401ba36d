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

Numbering is serialized, waiting is not: under its lock a ``Sequencer`` gives the next number
and queues the record (``Journal.start_send``), then waits for the acknowledgement outside it,
so one instance sends at the broker's pace, not one round trip at a time. Queued records reach
the log in the order of their numbers: the backends keep the queueing order within a partition.

A failed send may or may not have reached the log, so the number after it is read from the log
again: a record that never landed leaves no gap (a broker outage would otherwise put every
subscriber in SEQUENCE_GAP), and one that did is not numbered twice. That read waits until
every record still in flight has landed or failed, or one landing after it would be numbered
twice. Only a record the broker writes after its send failed (librdkafka gave up on it while
the broker was still writing it) is numbered twice, and a subscriber refuses it as a replay,
counted and logged; one that failed while a record queued behind it landed leaves a gap, which
subscribers report. Waiting, for the lock and for the records in flight, is bounded
(``wait_s``): a request behind sends stuck on an unreachable broker fails as unavailable (a
retry helps) instead of queueing for one send timeout per request ahead of it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from google.protobuf.message import Message

from journal.api import Journal, PendingSend, Position
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


class Sequencer:
    """Numbers and sends the records one publisher agent sends to one topic (thread-safe)."""

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
        count when the tail is read; ``wait_s``: how long a record waits for its number."""
        self.journal = journal
        self.topic = topic
        self.agent = agent
        self.verifier = verifier
        self.max_scan_records = max_scan_records
        self.wait_s = wait_s
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)  # notified when _in_flight drops to 0
        self._last: int | None = None  # the last number given; None: read the log first
        self._stale = False  # read the log before the next number (a failed send, resync)
        self._in_flight = 0  # records queued whose outcome is not known yet

    @property
    def last(self) -> int | None:
        return self._last

    def resync(self) -> None:
        """Read the log again before the next number (this instance became leader). Does not
        wait for a send in progress: the leadership thread calls it."""
        self._stale = True

    def send(self, encode: Encoder, key: bytes | None = None) -> int:
        """Number, encode (``encode(number)``) and send one record; its offset once it is on
        the log. Raises what the send raised, then the number after it is read from the log
        (see the module docstring); JournalUnavailable when the number waited over ``wait_s``."""
        pending = self._start(encode, key)
        try:
            return self.journal.finish_send(pending)
        except BaseException:
            self._stale = True
            raise
        finally:
            with self._settled:
                self._in_flight -= 1
                if self._in_flight == 0:
                    self._settled.notify_all()

    def _start(self, encode: Encoder, key: bytes | None) -> PendingSend:
        """Under the lock: the next number, the record queued and counted in flight."""
        deadline = time.monotonic() + self.wait_s
        if not self._lock.acquire(timeout=self.wait_s):
            raise self._waited()
        try:
            if not self._settled.wait_for(self._may_number, deadline - time.monotonic()):
                raise self._waited()
            if self._last is None or self._stale:
                self._last, self._stale = self._resume(), False
            number = self._last + 1
            value, headers = encode(number)
            pending = self.journal.start_send(self.topic, value, key=key, headers=headers)
            self._last = number
            self._in_flight += 1
            return pending
        except BaseException:
            self._stale = True
            raise
        finally:
            self._lock.release()

    def _may_number(self) -> bool:
        """Numbering goes on from memory, or the log holds every record sent so far."""
        return (self._last is not None and not self._stale) or self._in_flight == 0

    def _waited(self) -> JournalUnavailable:
        return JournalUnavailable(
            f"{self.topic}: the record of {self.agent} ahead of this one waited over "
            f"{self.wait_s} s for the journal"
        )

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
