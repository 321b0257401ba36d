"""SIGHUP re-reads the agents file (subscriber/daemon.py ``_reload``): agents it adds start,
agents it no longer lists stop, the rest run on; a file that fails the start-up checks changes
nothing, and one new agent that cannot start keeps neither the running ones nor the other new
ones from running. Fakes for the journal and the agents; the real daemon runs it in
tests/e2e/test_hundred.py."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, cast

import pytest

from journal.api import Journal
from subscriber.agent import SubscriberAgent
from subscriber.daemon import _reload
from subscriber.fleet.agents_file import agent_settings
from subscriber.fleet.view import AgentsView
from subscriber.settings import SubscriberSettings


class FakeJournal:
    def earliest_offset(self, _topic: str) -> int:
        return 0

    def latest_offset(self, _topic: str) -> int:
        return 42


class FakeAgent:
    def __init__(self, settings: SubscriberSettings, start: int) -> None:
        self.settings = settings
        self.name = settings.agent_name
        self.start_offset = start
        self.running = False
        self.stopped = False

    def start(self) -> None:
        self.running = True

    def stop(self) -> None:
        self.running, self.stopped = False, True


def write(path: Path, agents: dict[str, str], extra: str = "") -> None:
    path.write_text(
        "".join(f'[[agent]]\nname = "{n}"\nstore_path = "{p}"\n{extra}' for n, p in agents.items())
    )


class Daemon:
    """The running agents of a daemon started with ``agents``, and its reload."""

    def __init__(self, tmp_path: Path, agents: dict[str, str]) -> None:
        self.file = tmp_path / "agents.toml"
        write(self.file, agents)
        self.settings = SubscriberSettings(agents_file=str(self.file), reset="earliest")
        self.agents = [FakeAgent(one, -1) for one in agent_settings(self.settings)]
        for agent in self.agents:
            agent.start()
        self.view = AgentsView(cast(Any, list(self.agents)))
        self.failing: set[str] = set()

    def make(self, one: SubscriberSettings, start: int) -> SubscriberAgent:
        if one.agent_name in self.failing:
            raise OSError("cannot open the store")
        return cast(SubscriberAgent, FakeAgent(one, start))

    def reload(self) -> None:
        _reload(
            self.settings,
            cast(Journal, FakeJournal()),
            cast(list[SubscriberAgent], self.agents),
            self.view,
            self.make,
            threading.Event(),
        )

    def names(self) -> list[str]:
        assert [a.name for a in self.agents] == [a.name for a in self.view.agents]
        return [a.name for a in self.agents]


def test_added_agents_start_removed_ones_stop_the_rest_run_on(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path, {"a": "/s/a", "b": "/s/b"})
    a, b = daemon.agents
    write(daemon.file, {"b": "/s/b", "c": "/s/c"})
    daemon.reload()
    assert daemon.names() == ["b", "c"]
    assert a.stopped
    assert not a.running
    assert b.running
    assert not b.stopped
    c = daemon.agents[1]
    assert c.running
    assert c.start_offset == 0


def test_a_bad_file_changes_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    daemon = Daemon(tmp_path, {"a": "/s/a", "b": "/s/b"})
    daemon.file.write_text('[[agent]]\nname = "a"\nstore_path = "/s/a"\n' * 2 + "[[agent]]\n")
    with caplog.at_level(logging.ERROR, logger="subscriber.daemon"):
        daemon.reload()
    assert daemon.names() == ["a", "b"]
    assert all(a.running for a in daemon.agents)
    assert "agents file not applied" in caplog.text


def test_a_new_agent_that_cannot_start_stops_no_other(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    daemon = Daemon(tmp_path, {"a": "/s/a"})
    daemon.failing = {"b"}
    write(daemon.file, {"a": "/s/a", "b": "/s/b", "c": "/s/c"})
    with caplog.at_level(logging.ERROR, logger="subscriber.daemon"):
        daemon.reload()
    assert daemon.names() == ["a", "c"]
    assert all(a.running for a in daemon.agents)
    assert "subscriber b not started" in caplog.text


def test_changed_settings_wait_for_a_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    daemon = Daemon(tmp_path, {"a": "/s/a"})
    before = daemon.agents[0]
    write(daemon.file, {"a": "/s/a"}, extra="max_retries = 3\n")
    with caplog.at_level(logging.WARNING, logger="subscriber.daemon"):
        daemon.reload()
    assert daemon.agents == [before]
    assert before.running
    assert before.settings.max_retries != 3
    assert "settings of a changed" in caplog.text
