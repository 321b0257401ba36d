"""Publisher fixtures: an agent on the embedded SQLite journal and a local blob store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from blobstore.local import LocalBlobStore
from journal.settings import JournalSettings
from journal.sqlite.journal import SqliteJournal
from publisher.agent import PublisherAgent
from publisher.api import create_app
from publisher.settings import PublisherSettings

TOKEN = "unit-test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# Unit tests refresh the view and run leader jobs every 50 ms so that they finish quickly.
FAST_REFRESH_S = 0.05
# A journal poll of the agent's readers waits 20 ms at most: stopping an agent, which every
# test does, waits for the polls in progress.
FAST_POLL_S = 0.02


def publisher_settings(**overrides: Any) -> PublisherSettings:
    values: dict[str, Any] = {
        "api_token": TOKEN,
        "instance_id": "pub-1",
        "view_refresh_s": FAST_REFRESH_S,
        "leader_lock_retry_s": FAST_REFRESH_S,
        "poll_timeout_s": FAST_POLL_S,
        **overrides,
    }
    return PublisherSettings(**values)


@pytest.fixture
def journal_settings(tmp_path: Path) -> JournalSettings:
    return JournalSettings(backend="sqlite", sqlite_path=tmp_path / "journal.db")


@pytest.fixture
def journal(journal_settings: JournalSettings) -> Iterator[SqliteJournal]:
    j = SqliteJournal(journal_settings.sqlite_path)
    yield j
    j.close()


@pytest.fixture
def blobs(tmp_path: Path) -> LocalBlobStore:
    return LocalBlobStore(tmp_path / "blobs")


@pytest.fixture
def content_root(tmp_path: Path) -> Path:
    root = tmp_path / "content"
    root.mkdir()
    return root


AgentFactory = Callable[..., PublisherAgent]


@pytest.fixture
def make_agent(
    journal: SqliteJournal, journal_settings: JournalSettings, blobs: LocalBlobStore
) -> Iterator[AgentFactory]:
    agents: list[PublisherAgent] = []

    def make(start: bool = True, **overrides: Any) -> PublisherAgent:
        agent = PublisherAgent(publisher_settings(**overrides), journal_settings, journal, blobs)
        agents.append(agent)
        return agent.start() if start else agent

    yield make
    for agent in agents:
        agent.stop()


@pytest.fixture
def agent(make_agent: AgentFactory, content_root: Path) -> PublisherAgent:
    return make_agent(content_root=content_root)


@pytest.fixture
def client(agent: PublisherAgent) -> TestClient:
    return TestClient(create_app(agent), headers=AUTH)
