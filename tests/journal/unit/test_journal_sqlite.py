"""The journal contract on the embedded SQLite backend, plus what only it must prove:
several processes sharing one file."""

from __future__ import annotations

import itertools
import multiprocessing
from collections.abc import Iterator
from pathlib import Path

import pytest

from journal.api import Journal, Position, TopicSpec
from journal.sqlite.journal import SqliteJournal
from tests.contract.journal_contract import (
    GarbageOnEveryTopic,
    JournalContract,
    NewTopic,
    read_all,
)
from tests.journal.retention import expire_now

_names = itertools.count()


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[SqliteJournal]:
    with SqliteJournal(tmp_path / "journal.db") as j:
        yield j


@pytest.fixture
def new_topic(journal: Journal) -> NewTopic:
    def make(**kwargs: int) -> str:
        name = f"t{next(_names)}"
        journal.create_topics([TopicSpec(name, **kwargs)])
        return name

    return make


class TestSqliteJournal(JournalContract, GarbageOnEveryTopic):
    retention_ms = 200

    def expire(self, journal: Journal) -> None:
        assert isinstance(journal, SqliteJournal)
        expire_now(journal)


def _writer(path: str, worker: int, count: int) -> None:
    with SqliteJournal(path) as j:
        for i in range(count):
            j.send("shared", f"{worker}:{i}".encode())


def test_processes_share_one_file_with_unique_monotonic_offsets(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    with SqliteJournal(path) as j:
        j.create_topics([TopicSpec("shared")])
    workers, per_worker = 4, 100
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), w, per_worker)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with SqliteJournal(path) as j:
        records = read_all(j, "shared", Position.earliest(), workers * per_worker)
    assert [r.offset for r in records] == list(range(workers * per_worker))
    for w in range(workers):  # each writer's records keep their order
        mine = [
            int(r.value.split(b":")[1]) for r in records if r.value.startswith(f"{w}:".encode())
        ]
        assert mine == list(range(per_worker))
