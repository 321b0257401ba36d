"""The publisher's CLI commands against a running publisher API (SQLite journal)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from publisher import cli
from publisher.agent import PublisherAgent
from publisher.api import create_app
from runtime.http_server import AppServer
from scd.cli import main
from tests.publisher.conftest import TOKEN
from tests.publisher.simulate import SimulatedSubscriber
from tests.waiting import wait_for


@pytest.fixture
def url(agent: PublisherAgent) -> Iterator[str]:
    with AppServer(create_app(agent)) as server:
        yield server.url


def test_distribute_queues_clear_pause_and_cleanup(
    agent: PublisherAgent, url: str, content_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (content_root / "a").mkdir()
    (content_root / "a" / "x.txt").write_text("x")
    auth = ["--url", url, "--token", TOKEN]
    assert main(["distribute", "ADD", "--deep", "/a", *auth]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["offset"] == 0
    assert result["spilled"] is False

    requests = "\n".join(json.dumps({"action": "TEST", "paths": [f"/t{i}"]}) for i in range(3))
    batch = content_root.parent / "requests.jsonl"
    batch.write_text(requests + "\n")
    assert main(["distribute", "--file", str(batch), *auth]) == 0
    assert "distributed 3 packages" in capsys.readouterr().out

    sub = SimulatedSubscriber(agent.journal, agent.topics, "sub-1", editable=True, max_retries=-1)
    sub.announce(-1)
    wait_for(lambda: agent.queues.summaries(), what="the subscriber's queue")
    assert main(["queues", "--url", url]) == 0
    table = capsys.readouterr().out
    assert sub.queue_name in table
    assert "RUNNING" in table

    assert main(["clear", sub.queue_name, "head", *auth]) == 0
    assert json.loads(capsys.readouterr().out)
    assert main(["queues", "pause", sub.queue_name, *auth]) == 0
    assert json.loads(capsys.readouterr().out)["paused"] is True
    assert main(["queues", "resume", sub.queue_name, *auth]) == 0
    assert json.loads(capsys.readouterr().out)["paused"] is False
    assert main(["cleanup", *auth]) == 0
    assert "deleted" in capsys.readouterr().out


def test_errors_are_one_line(url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["distribute", "ADD", "/a", "--url", url]) == 1  # no token
    err = capsys.readouterr().err
    assert "HTTP 401" in err
    assert err.count("\n") == 1
    assert main(["queues", "--url", "http://127.0.0.1:9"]) == 1
    assert "unreachable" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json}\n")
    with pytest.raises(SystemExit, match="line 1: not JSON"):
        main(["distribute", "--file", str(bad), "--url", url])


def test_queues_reads_every_page(
    agent: PublisherAgent,
    url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cli, "QUEUES_PAGE", 2)
    for i in range(5):
        SimulatedSubscriber(agent.journal, agent.topics, f"sub-{i}").announce(-1)
    wait_for(lambda: len(agent.queues.summaries()) == 5, what="5 queues")
    assert main(["queues", "--json", "--url", url]) == 0
    shown = [q["name"] for q in json.loads(capsys.readouterr().out)]
    assert shown == [f"sub-{i}-subscriber" for i in range(5)]
