"""Where a store resumes (subscriber/bookkeeper/resume.py): at its offset on the log it came
from, by sequence on another one (a mirror whose offsets differ, a cloned store moved), on the
embedded journal."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from journal.api import TopicSpec
from journal.messaging import MessageSender
from journal.sqlite.journal import SqliteJournal
from journal.wire.messages import PackageMessage, ReqType
from subscriber.bookkeeper.resume import resume_offset
from tests.journal.retention import expire_now

TOPIC = "package"


def package(agent: str, sequence: int) -> PackageMessage:
    return PackageMessage(
        pub_sling_id="pub",
        pub_agent_name=agent,
        pkg_id=uuid.uuid4().hex,
        req_type=ReqType.ADD,
        pkg_type="scd-content",
        sequence=sequence,
    )


@pytest.fixture
def journal(tmp_path: Path) -> SqliteJournal:
    journal = SqliteJournal(tmp_path / "journal.db")
    journal.create_topics([TopicSpec(TOPIC)])
    return journal


def write(journal: SqliteJournal, *numbers: int, agent: str = "publish") -> list[int]:
    sender = MessageSender(journal, TOPIC)
    return [sender.send(package(agent, n)) for n in numbers]


def test_on_the_log_it_came_from_it_resumes_after_its_offset(journal: SqliteJournal) -> None:
    offsets = write(journal, 1, 2, 3, 4)
    assert resume_offset(journal, TOPIC, offsets[1], {"publish": 2}) == offsets[1] + 1


def test_on_a_mirror_with_fewer_records_before_it_resumes_from_the_start(
    journal: SqliteJournal,
) -> None:
    # The store applied 1..4 at offsets 0..3 of region A; B's copy started at A's offset 2, so
    # B's offset 3 holds sequence 6: resuming there would skip 5.
    write(journal, 3, 4, 5, 6, 7)
    assert resume_offset(journal, TOPIC, 3, {"publish": 4}) == 0


def test_on_a_mirror_with_more_records_before_it_the_next_offset_is_safe(
    journal: SqliteJournal,
) -> None:
    # B holds a duplicated batch (MirrorMaker delivers at least once): 1 2 2 3 4; the store
    # applied 1..3 at A's offsets 0..2. B's offset 2 holds 2 <= 3: everything above 3 is later.
    write(journal, 1, 2, 2, 3, 4)
    assert resume_offset(journal, TOPIC, 2, {"publish": 3}) == 3


def test_an_offset_past_the_mirrors_end_resumes_from_its_start(journal: SqliteJournal) -> None:
    write(journal, 5, 6)
    assert resume_offset(journal, TOPIC, 40, {"publish": 5}) == 0


def test_a_record_of_another_agent_or_unnumbered_is_no_proof(journal: SqliteJournal) -> None:
    # Re-reading the log could import unnumbered packages twice: the offset decides.
    write(journal, 7, agent="other")
    write(journal, 0)
    assert resume_offset(journal, TOPIC, 0, {"publish": 1}) == 1
    assert resume_offset(journal, TOPIC, 1, {"publish": 1}) == 2


def test_an_offset_the_log_deleted_is_left_to_the_lag_check(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "short.db")
    journal.create_topics([TopicSpec(TOPIC, retention_ms=1)])
    write(journal, 1, 2, 3)
    time.sleep(0.01)
    expire_now(journal)
    write(journal, 4)
    assert journal.earliest_offset(TOPIC) == 3
    assert resume_offset(journal, TOPIC, 1, {"publish": 2}) == 2


def test_without_sequences_the_offset_decides_as_before(journal: SqliteJournal) -> None:
    write(journal, 0, 0)
    assert resume_offset(journal, TOPIC, 0, {}) == 1
    assert resume_offset(journal, TOPIC, None, {"publish": 1}) is None


def test_hostile_records_at_the_offset_are_no_proof(journal: SqliteJournal) -> None:
    journal.send(TOPIC, b"\xff" * 64, headers={"type": "PackageMessage"})
    journal.send(TOPIC, b"junk", headers={"type": "NoSuchMessage"})
    journal.send(TOPIC, b"junk")
    for offset in range(3):
        assert resume_offset(journal, TOPIC, offset, {"publish": 1}) == offset + 1
