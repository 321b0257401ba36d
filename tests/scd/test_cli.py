"""The scd CLI on the embedded journal: happy paths and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from journal.factory import open_journal
from journal.messaging import MessageSender
from journal.settings import JournalSettings
from journal.wire import messages as m
from scd.cli import main


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "j.db"
    monkeypatch.setenv("SCD_JOURNAL_BACKEND", "sqlite")
    monkeypatch.setenv("SCD_JOURNAL_SQLITE_PATH", str(path))
    return path


@pytest.mark.usefixtures("db")
def test_topics_create_show_and_tail(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topics", "create"]) == 0
    assert "scd.package" in capsys.readouterr().out
    with open_journal(JournalSettings()) as journal:
        sender = MessageSender(journal, "scd.status")
        for offset in (0, 1):
            sender.send(
                m.PackageStatusMessage(
                    sub_sling_id="s",
                    sub_agent_name="a",
                    pub_agent_name="p",
                    offset=offset,
                    status=m.Status.IMPORTED,
                )
            )
        journal.send("scd.status", b"\xff garbage", headers={"type": "PackageStatusMessage"})
    assert main(["topics", "show"]) == 0
    assert "scd.status\t0\t0\t3" in capsys.readouterr().out
    assert main(["tail", "scd.status", "--from", "earliest"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["offset"] for line in lines] == [0, 1, 2]
    assert lines[1]["message"]["offset"] == "1"
    assert "undecodable" in lines[2]["error"]


def test_bad_setting_names_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SCD_JOURNAL_BACKEND", "carrier-pigeon")
    assert main(["topics", "show"]) == 2
    err = capsys.readouterr().err
    assert "SCD_JOURNAL_BACKEND" in err
    assert err.count("\n") == 1


@pytest.mark.usefixtures("db")
def test_unknown_topic_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tail", "no.such.topic"]) == 1
    err = capsys.readouterr().err
    assert "no.such.topic" in err
    assert err.count("\n") == 1


@pytest.mark.usefixtures("db")
def test_bad_position_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["tail", "scd.status", "--from", "yesterday"])
    assert info.value.code == 2
    assert "invalid position" in capsys.readouterr().err


def test_sasl_without_credentials_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SCD_JOURNAL_SECURITY__PROTOCOL", "SASL_SSL")
    assert main(["topics", "show"]) == 2
    assert "security" in capsys.readouterr().err
