"""Retention of the embedded journal applied at once, for tests. The journal itself applies it
on a flush at most every RETENTION_CHECK_INTERVAL_S; a test cannot wait that long per step."""

from __future__ import annotations

from journal.api import Journal
from journal.sqlite.journal import SqliteJournal
from runtime.clock import now_ms


def expire_now(journal: Journal) -> None:
    assert isinstance(journal, SqliteJournal), "retention on demand is the embedded journal's"
    with journal._lock:
        journal._last_retention = 0.0
        journal._expire(now_ms())
