"""A real publisher agent (SQLite journal) whose background threads fail: it keeps serving,
reports the thread down on /ready, counts the restart on /metrics and recovers."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from publisher.agent import PublisherAgent
from tests.waiting import wait_for


def restarts(client: TestClient, thread: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(f'scd_thread_restarts_total{{thread="{thread}"}}'):
            return float(line.split()[-1])
    return 0.0


def test_queue_cache_tail_failing_keeps_serving_and_recovers_without_losing_a_package(
    agent: PublisherAgent,
    client: TestClient,
    content_root: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (content_root / "p").write_text("x")
    assert client.get("/ready").status_code == 200
    before = restarts(client, "queue-cache-tail")
    # Fails after the tail consumer polled the batch, before it is cached (a per-record
    # handler failure is absorbed as a bad record; this one is not a record's fault).
    tail = agent.cache._tail
    assert tail is not None
    real = tail.positions
    broken = [True]

    def positions() -> dict[int, int]:
        if broken[0]:
            raise RuntimeError("queue cache tail bug")
        return real()

    monkeypatch.setattr(tail, "positions", positions)
    # Still serving: the request is answered once the package is on the log.
    sent = client.post("/distribute", json={"action": "ADD", "paths": ["/p"]})
    assert sent.status_code == 200, sent.text
    offset = sent.json()["offset"]

    def down() -> bool:
        answer = client.get("/ready")
        return answer.status_code == 503 and "queue-cache-tail" in answer.json()["reason"]

    wait_for(down, what="/ready to report the queue cache thread down")
    assert restarts(client, "queue-cache-tail") > before
    assert client.get("/queues").status_code == 200
    assert agent.cache.entry_at(offset) is None

    broken[0] = False
    wait_for(lambda: client.get("/ready").status_code == 200, what="/ready after the restart")
    # The batch polled when it failed was read again: the package is cached, not lost.
    wait_for(lambda: agent.cache.entry_at(offset), what="the package in the cache")
    assert client.get("/ready").json() == {"status": "ready"}


def test_maintenance_loop_failing_is_restarted_and_counted(
    agent: PublisherAgent, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = restarts(client, "publisher-maintenance")
    failures = [0]
    refresh = agent.discovery.refresh

    def flaky() -> None:
        if failures[0] < 2:
            failures[0] += 1
            raise ValueError("discovery view bug")
        refresh()

    monkeypatch.setattr(agent.discovery, "refresh", flaky)
    wait_for(
        lambda: restarts(client, "publisher-maintenance") - before >= 2,
        what="two counted restarts of the maintenance loop",
    )
    wait_for(lambda: client.get("/ready").status_code == 200, what="/ready after the restarts")
