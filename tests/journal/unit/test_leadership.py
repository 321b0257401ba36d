"""journal/leadership.py: a slow change of role is reported with where it waits."""

from __future__ import annotations

import logging
import time

import pytest

from journal import leadership
from journal.leadership import Leadership


class _Idle(Leadership):
    def _run(self) -> None:
        self._stop.wait()


def test_a_slow_change_of_role_is_logged_with_its_stack(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(leadership, "SLOW_ROLE_CHANGE_S", 0.05)
    member = _Idle("test-leader")

    def opening_a_writer_against_a_hung_journal(_leader: bool) -> None:
        time.sleep(0.5)

    member._listener = opening_a_writer_against_a_hung_journal
    with caplog.at_level(logging.WARNING, logger="journal.leadership"):
        member._set(True)
    assert member.is_leader
    (record,) = [r for r in caplog.records if "change of role" in r.getMessage()]
    assert "opening_a_writer_against_a_hung_journal" in record.getMessage()


def test_a_quick_change_of_role_logs_no_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(leadership, "SLOW_ROLE_CHANGE_S", 0.2)
    member = _Idle("test-leader")
    member._listener = lambda _leader: None
    with caplog.at_level(logging.WARNING, logger="journal.leadership"):
        member._set(True)
        member._set(False)
        time.sleep(0.4)
    assert not [r for r in caplog.records if "change of role" in r.getMessage()]
