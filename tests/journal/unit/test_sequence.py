"""Sequence numbers from the log's tail (journal/sequence.py), on the embedded journal, and
its batches and failures, on a journal whose writes the test releases."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from journal.api import FencedWriter, OutgoingRecord, Position, TopicSpec
from journal.errors import Fenced, JournalUnavailable, NotWriter
from journal.sequence import Encoder, Sequencer, highest_sequence, record_sequence
from journal.sqlite.journal import SqliteJournal
from journal.wire import messages as m
from journal.wire.signing import RecordSigner

TOPIC = "packages"
# A bound on waits that only a broken sequencer would reach.
WAIT_S = 10.0


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[SqliteJournal]:
    with SqliteJournal(tmp_path / "j.db") as j:
        j.create_topics([TopicSpec(TOPIC), TopicSpec("commands", partitions=2)])
        yield j


def package(agent: str, sequence: int) -> m.PackageMessage:
    return m.PackageMessage(
        pub_sling_id="i", pub_agent_name=agent, pkg_id="p", req_type=m.ReqType.ADD,
        pkg_type="scd", sequence=sequence,
    )  # fmt: skip


def send(
    journal: SqliteJournal, message: m.PackageMessage, signer: RecordSigner | None = None
) -> int:
    value, headers = m.encode(message)
    if signer is not None:
        headers = signer.signed_headers(TOPIC, headers, value)
    return journal.send(TOPIC, value, headers=headers)


def numbers(sequencer: Sequencer, count: int) -> list[int]:
    got: list[int] = []
    for _ in range(count):
        sequencer.send(recording(sequencer.agent, got))
    return got


def recording(agent: str, got: list[int]) -> Encoder:
    """Encodes a package of ``agent`` for the number it is given, noting the number."""

    def encode(number: int) -> tuple[bytes, dict[str, str]]:
        got.append(number)
        return m.encode(package(agent, number))

    return encode


def failing(number: int) -> tuple[bytes, dict[str, str]]:
    raise RuntimeError(f"encoding {number} failed")


def logged_numbers(journal: SqliteJournal) -> list[int]:
    """The sequence numbers on the topic, in log order."""
    got: list[int] = []
    with journal.consumer(TOPIC, Position.earliest()) as consumer:
        while records := consumer.poll(0.1, max_records=10_000):
            got.extend(record_sequence(m.decode(r.headers, r.value)) for r in records)
    return got


class Gate:
    """The outcome of one batch's write, decided by the test."""

    def __init__(self, size: int) -> None:
        self.size = size  # records in the batch
        self.opened = threading.Event()
        self.outcome = "land"

    def land(self) -> None:
        self.opened.set()

    def fail(self, landed: bool = False) -> None:
        """The write fails; with ``landed`` its records are on the log all the same, as a Kafka
        batch whose commit was acknowledged too late."""
        self.outcome = "fail-landed" if landed else "fail"
        self.opened.set()


class GatedWriter(FencedWriter):
    def __init__(self, journal: GatedJournal, inner: FencedWriter) -> None:
        self.journal = journal
        self.inner = inner

    def write(self, topic: str, records: Sequence[OutgoingRecord]) -> list[int]:
        gate = self.journal.gate(len(records))
        assert gate.opened.wait(WAIT_S), "the test never opened the gate"
        if gate.outcome == "fail":
            raise JournalUnavailable("no acknowledgement (test)")
        offsets = self.inner.write(topic, records)
        if gate.outcome == "fail-landed":
            raise JournalUnavailable("acknowledged too late (test)")
        return offsets

    def close(self) -> None:
        self.inner.close()


class GatedJournal(SqliteJournal):
    """Each batch a fenced writer writes waits until its gate (``gates``, in order) opens."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.gates: list[Gate] = []
        self._started = threading.Condition()

    def fenced_writer(self, fence_id: str) -> FencedWriter:
        return GatedWriter(self, super().fenced_writer(fence_id))

    def gate(self, size: int) -> Gate:
        with self._started:
            self.gates.append(gate := Gate(size))
            self._started.notify_all()
        return gate

    def started(self, count: int) -> None:
        """Wait until ``count`` batches are being written."""
        with self._started:
            assert self._started.wait_for(lambda: len(self.gates) >= count, WAIT_S)


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[GatedJournal]:
    with GatedJournal(tmp_path / "gated.db") as j:
        j.create_topics([TopicSpec(TOPIC)])
        yield j


def test_numbers_grow_across_restarts_and_instances(journal: SqliteJournal) -> None:
    assert numbers(Sequencer(journal, TOPIC, "pub"), 3) == [1, 2, 3]
    send(journal, package("other", 40))  # another agent's numbers are its own
    # A restarted or second instance continues from the log, not from memory.
    assert numbers(Sequencer(journal, TOPIC, "pub"), 2) == [4, 5]
    assert highest_sequence(journal, TOPIC, "pub") == (5, 6)


def test_after_a_failed_write_the_next_number_is_read_from_the_log(gated: GatedJournal) -> None:
    sequencer = Sequencer(gated, TOPIC, "pub", wait_s=WAIT_S)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(numbers, sequencer, 1)
        gated.started(1)
        gated.gates[0].land()
        assert first.result(WAIT_S) == [1]
        # A batch that never reached the log leaves no gap.
        lost = pool.submit(numbers, sequencer, 1)
        gated.started(2)
        gated.gates[1].fail()
        with pytest.raises(JournalUnavailable):
            lost.result(WAIT_S)
        second = pool.submit(numbers, sequencer, 1)
        gated.started(3)
        gated.gates[2].land()
        assert second.result(WAIT_S) == [2]  # the number the lost one had
        # A batch that reached the log although its write failed is not numbered twice.
        late = pool.submit(numbers, sequencer, 1)
        gated.started(4)
        gated.gates[3].fail(landed=True)
        with pytest.raises(JournalUnavailable):
            late.result(WAIT_S)
        after = pool.submit(numbers, sequencer, 1)
        gated.started(5)
        gated.gates[4].land()
        assert after.result(WAIT_S) == [4]
    with pytest.raises(RuntimeError):  # an encoding that fails numbers nothing
        sequencer.send(failing)
    assert logged_numbers(gated) == [1, 2, 3, 4]


def test_concurrent_sends_reach_the_log_in_the_order_of_their_numbers(
    journal: SqliteJournal,
) -> None:
    sequencer = Sequencer(journal, TOPIC, "pub")
    per_thread, threads = 200, 8
    with ThreadPoolExecutor(threads) as pool:
        given = list(pool.map(lambda _: numbers(sequencer, per_thread), range(threads)))
    assert all(len(numbers) == per_thread for numbers in given)
    # No gap, no number twice, and the log holds them in ascending order.
    assert logged_numbers(journal) == list(range(1, per_thread * threads + 1))


def test_records_queued_behind_a_batch_are_written_as_the_next_batch(
    gated: GatedJournal,
) -> None:
    sequencer = Sequencer(gated, TOPIC, "pub", wait_s=WAIT_S)
    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(numbers, sequencer, 1)
        gated.started(1)
        behind = [pool.submit(numbers, sequencer, 1) for _ in range(3)]
        time.sleep(0.2)  # numbered and queued while the first batch is being written
        gated.gates[0].land()
        gated.started(2)
        gated.gates[1].land()
        assert first.result(WAIT_S) == [1]
        assert sorted(f.result(WAIT_S)[0] for f in behind) == [2, 3, 4]
    assert [g.size for g in gated.gates] == [1, 3]
    assert logged_numbers(gated) == [1, 2, 3, 4]


def test_records_queued_behind_a_failed_batch_fail_with_it(gated: GatedJournal) -> None:
    sequencer = Sequencer(gated, TOPIC, "pub", wait_s=WAIT_S)
    with ThreadPoolExecutor(3) as pool:
        failed = pool.submit(numbers, sequencer, 1)
        gated.started(1)
        behind = pool.submit(numbers, sequencer, 1)
        time.sleep(0.2)
        gated.gates[0].fail()
        for f in (failed, behind):  # numbered 2 after a 1 that is not on the log: both fail
            with pytest.raises(JournalUnavailable):
                f.result(WAIT_S)
        after = pool.submit(numbers, sequencer, 1)
        gated.started(2)
        gated.gates[1].land()
        assert after.result(WAIT_S) == [1]
    assert logged_numbers(gated) == [1]


def test_the_wait_for_the_batch_ahead_is_bounded(gated: GatedJournal) -> None:
    sequencer = Sequencer(gated, TOPIC, "pub", wait_s=0.3)
    with ThreadPoolExecutor(2) as pool:
        stuck = pool.submit(numbers, sequencer, 1)
        gated.started(1)
        started = time.monotonic()
        with pytest.raises(JournalUnavailable, match=r"waited over 0\.3 s"):
            sequencer.send(recording("pub", []))
        assert 0.3 <= time.monotonic() - started < 5
        gated.gates[0].land()
        assert stuck.result(WAIT_S) == [1]
        # The one that gave up was taken off the queue: the next number is read again.
        after = pool.submit(numbers, sequencer, 1)
        gated.started(2)
        gated.gates[1].land()
        assert after.result(WAIT_S) == [2]
    assert [g.size for g in gated.gates] == [1, 1]


def test_a_record_taken_into_a_batch_being_written_waits_for_that_write(
    gated: GatedJournal,
) -> None:
    """Two records wait behind a batch; the first to get the writer takes both along, and the
    other's wait runs out while that batch is written: it waits for the write, which decides
    whether it landed, instead of being refused (it may be on the log) or failing (500)."""
    sequencer = Sequencer(gated, TOPIC, "pub", wait_s=0.6)
    with ThreadPoolExecutor(3) as pool:
        first = pool.submit(numbers, sequencer, 1)
        gated.started(1)
        behind = [pool.submit(numbers, sequencer, 1) for _ in range(2)]
        time.sleep(0.1)  # both numbered and waiting for the writer
        gated.gates[0].land()
        gated.started(2)
        time.sleep(1.0)  # past the wait of the one left behind
        gated.gates[1].land()
        assert first.result(WAIT_S) == [1]
        assert sorted(f.result(WAIT_S)[0] for f in behind) == [2, 3]
    assert [g.size for g in gated.gates] == [1, 2]
    assert logged_numbers(gated) == [1, 2, 3]


def test_a_fenced_instance_lands_nothing_and_numbers_stay_unique(journal: SqliteJournal) -> None:
    first, second = Sequencer(journal, TOPIC, "pub"), Sequencer(journal, TOPIC, "pub")
    assert numbers(first, 2) == [1, 2]
    assert numbers(second, 2) == [3, 4]  # opening its writer fenced the first one
    with pytest.raises(NotWriter) as fenced:  # the first numbers from memory: 3 again, fenced
        numbers(first, 1)
    assert isinstance(fenced.value.__cause__, Fenced)
    assert numbers(first, 1) == [5]  # opened again (fencing the second), read the log
    with pytest.raises(NotWriter):
        numbers(second, 1)
    assert logged_numbers(journal) == [1, 2, 3, 4, 5]


def test_an_instance_that_may_not_write_refuses(journal: SqliteJournal) -> None:
    allowed = threading.Event()
    sequencer = Sequencer(journal, TOPIC, "pub", may_write=allowed.is_set)
    with pytest.raises(NotWriter):
        numbers(sequencer, 1)
    allowed.set()
    assert numbers(sequencer, 1) == [1]
    allowed.clear()
    sequencer.reset()  # no longer the writer
    with pytest.raises(NotWriter):
        numbers(sequencer, 1)
    assert logged_numbers(journal) == [1]


def test_a_number_waits_for_the_lock_at_most_wait_s(journal: SqliteJournal) -> None:
    sequencer = Sequencer(journal, TOPIC, "pub", wait_s=0.2)
    entered, release = threading.Event(), threading.Event()

    def stuck(number: int) -> tuple[bytes, dict[str, str]]:
        entered.set()
        release.wait(WAIT_S)
        return m.encode(package("pub", number))

    with ThreadPoolExecutor(1) as pool:
        ahead = pool.submit(sequencer.send, stuck)
        assert entered.wait(WAIT_S)
        started = time.monotonic()
        with pytest.raises(JournalUnavailable):
            sequencer.send(recording("pub", []))
        assert time.monotonic() - started < 5
        release.set()
        ahead.result(WAIT_S)


def test_a_number_above_the_record_count_is_ignored(journal: SqliteJournal) -> None:
    send(journal, package("pub", 1))
    send(journal, package("pub", 10**15))  # hostile: the topic never held that many records
    assert numbers(Sequencer(journal, TOPIC, "pub"), 1) == [2]


def test_nothing_within_reach_continues_above_the_record_count(journal: SqliteJournal) -> None:
    send(journal, package("pub", 1))
    for _ in range(7):
        send(journal, package("other", 1))
    # The scan reads 5 records back: "pub" is out of reach, so it continues after 8 records.
    assert numbers(Sequencer(journal, TOPIC, "pub", max_scan_records=5), 1) == [9]


def test_with_a_key_only_own_signed_records_count(journal: SqliteJournal) -> None:
    own = RecordSigner("own", Ed25519PrivateKey.generate())
    forger = RecordSigner("own", Ed25519PrivateKey.generate())  # same id, another key
    send(journal, package("pub", 1), own)
    send(journal, package("pub", 2), forger)
    send(journal, package("pub", 3))  # unsigned
    assert numbers(Sequencer(journal, TOPIC, "pub", own.verifier()), 1) == [2]


def test_commands_are_numbered_across_partitions(journal: SqliteJournal) -> None:
    sequencer = Sequencer(journal, "commands", "pub")
    for key in ("sub-a", "sub-b", "sub-c"):
        command = m.CommandMessage(
            sub_sling_id="s", sub_agent_name=key, pub_agent_name="pub",
            clear_command=m.ClearCommand(offset=0),
        )  # fmt: skip
        sequencer.send(functools.partial(numbered, command), key=key.encode())
    assert highest_sequence(journal, "commands", "pub") == (3, 3)


def numbered(command: m.CommandMessage, number: int) -> tuple[bytes, dict[str, str]]:
    command.sequence = number
    return m.encode(command)


class HangingOpenJournal(SqliteJournal):
    """Opening a fenced writer waits until ``release`` is set, as against a hung broker."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.opening = threading.Event()
        self.release = threading.Event()

    def fenced_writer(self, fence_id: str) -> FencedWriter:
        self.opening.set()
        assert self.release.wait(WAIT_S), "the test never released the opening"
        return super().fenced_writer(fence_id)


def test_a_reset_never_waits_for_a_writer_being_opened(tmp_path: Path) -> None:
    """The leader election resets the sequencer from the thread that keeps the instance in
    the election: waiting there for an opening against a hung journal kept a deposed leader
    out of the election for minutes, and no instance led. The opening under way when the
    reset came is not used: the next number opens again, and asks again whether it may."""
    with HangingOpenJournal(tmp_path / "hanging.db") as hanging:
        hanging.create_topics([TopicSpec(TOPIC)])
        leads = threading.Event()
        leads.set()
        sequencer = Sequencer(hanging, TOPIC, "pub", may_write=leads.is_set)
        with ThreadPoolExecutor(1) as pool:
            sending = pool.submit(numbers, sequencer, 1)
            assert hanging.opening.wait(WAIT_S)
            leads.clear()  # deposed while its writer opens
            started = time.monotonic()
            sequencer.reset()
            assert time.monotonic() - started < 0.5
            hanging.release.set()
            with pytest.raises(NotWriter):
                sending.result(WAIT_S)
        assert logged_numbers(hanging) == []
        leads.set()
        sequencer.reset()
        assert numbers(sequencer, 2) == [1, 2]
