"""Sequence numbers from the log's tail (journal/sequence.py), on the embedded journal."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from journal.api import TopicSpec
from journal.errors import JournalUnavailable
from journal.sequence import Sequencer, highest_sequence
from journal.sqlite.journal import SqliteJournal
from journal.wire import messages as m
from journal.wire.signing import RecordSigner

TOPIC = "packages"


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
    got = []
    for _ in range(count):
        with sequencer.numbering() as number:
            send(sequencer.journal, package(sequencer.agent, number))  # type: ignore[arg-type]
            got.append(number)
    return got


def test_numbers_grow_across_restarts_and_instances(journal: SqliteJournal) -> None:
    assert numbers(Sequencer(journal, TOPIC, "pub"), 3) == [1, 2, 3]
    send(journal, package("other", 40))  # another agent's numbers are its own
    # A restarted or second instance continues from the log, not from memory.
    assert numbers(Sequencer(journal, TOPIC, "pub"), 2) == [4, 5]
    assert highest_sequence(journal, TOPIC, "pub") == (5, 6)


def test_after_a_failed_send_the_next_number_is_read_from_the_log(
    journal: SqliteJournal,
) -> None:
    sequencer = Sequencer(journal, TOPIC, "pub")
    assert numbers(sequencer, 1) == [1]
    # A record that never reached the log leaves no gap.
    with pytest.raises(RuntimeError), sequencer.numbering():
        raise RuntimeError("send failed")
    assert numbers(sequencer, 1) == [2]
    # A record that reached the log although its send failed is not numbered twice.
    with pytest.raises(RuntimeError), sequencer.numbering() as number:
        send(journal, package("pub", number))
        raise RuntimeError("acknowledgement lost")
    assert numbers(sequencer, 1) == [4]


def test_a_number_waits_for_the_send_ahead_at_most_wait_s(journal: SqliteJournal) -> None:
    sequencer = Sequencer(journal, TOPIC, "pub", wait_s=0.2)
    entered, release = threading.Event(), threading.Event()

    def stuck_send() -> None:
        with sequencer.numbering():
            entered.set()
            release.wait(10)

    ahead = threading.Thread(target=stuck_send)
    ahead.start()
    assert entered.wait(10)
    started = time.monotonic()
    with pytest.raises(JournalUnavailable), sequencer.numbering():
        pass
    assert time.monotonic() - started < 5
    release.set()
    ahead.join(10)


def test_resync_reads_what_another_instance_sent(journal: SqliteJournal) -> None:
    first, second = Sequencer(journal, TOPIC, "pub"), Sequencer(journal, TOPIC, "pub")
    assert numbers(first, 2) == [1, 2]
    assert numbers(second, 2) == [3, 4]
    first.resync()  # became leader
    assert numbers(first, 1) == [5]


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
        with sequencer.numbering() as number:
            command = m.CommandMessage(
                sub_sling_id="s", sub_agent_name=key, pub_agent_name="pub", sequence=number,
                clear_command=m.ClearCommand(offset=0),
            )  # fmt: skip
            value, headers = m.encode(command)
            journal.send("commands", value, key=key.encode(), headers=headers)
    assert highest_sequence(journal, "commands", "pub") == (3, 3)
