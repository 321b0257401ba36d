"""Publisher throttling (Sling's queue size limit) on the embedded journal."""

from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient

from journal.settings import TopicSettings
from journal.sqlite.journal import SqliteJournal
from publisher.agent import PublisherAgent
from publisher.api import create_app
from publisher.client import PublisherClient
from publisher.queues.throttle import Throttle
from tests.publisher.conftest import AUTH, AgentFactory
from tests.publisher.simulate import SimulatedSubscriber
from tests.waiting import wait_for

TOPICS = TopicSettings()


@pytest.mark.parametrize(
    ("queue_size", "delay_s"),
    [(0, 0.0), (1000, 0.0), (1001, 0.02), (1500, 10.0), (2000, 20.0), (50_000, 20.0)],
)
def test_the_delay_grows_linearly_to_its_maximum_at_twice_the_limit(
    queue_size: int, delay_s: float
) -> None:
    assert Throttle(1000, 20.0).delay_s(queue_size) == pytest.approx(delay_s)


def test_a_limit_of_zero_never_throttles() -> None:
    assert Throttle(0, 20.0).delay_s(10**9) == 0.0


def distribute(client: TestClient, path: str) -> tuple[dict[str, object], float]:
    started = time.monotonic()
    body = PublisherClient(http=client).distribute({"action": "DELETE", "deepPaths": [path]})
    return body, time.monotonic() - started


def throttled_total(client: TestClient) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("scd_throttled_requests_total "):
            return float(line.split()[1])
    raise AssertionError("scd_throttled_requests_total is not in /metrics")


def test_requests_wait_while_an_editable_subscriber_is_far_behind(
    make_agent: AgentFactory, journal: SqliteJournal
) -> None:
    agent: PublisherAgent = make_agent(throttle_queue_limit=2, throttle_max_delay_s=0.5)
    client = TestClient(create_app(agent), headers=AUTH)
    offsets = [distribute(client, f"/p{i}")[0]["offset"] for i in range(5)]
    assert isinstance(offsets[0], int)

    reader = SimulatedSubscriber(journal, TOPICS, "reader", editable=False)
    reader.announce(offsets[0] - 1)  # 5 behind, but not editable: never throttles
    wait_for(lambda: len(agent.update_metrics()) == 1, what="the reader")
    body, _ = distribute(client, "/p5")
    assert body["throttledS"] == 0.0
    assert agent.throttle_queue_size == 0

    author = SimulatedSubscriber(journal, TOPICS, "author")
    author.announce(offsets[0])  # 5 items (offsets[1:] and /p5): beyond twice the limit
    wait_for(lambda: agent.throttle_queue_size == 5, what="the author's queue size")
    body, elapsed = distribute(client, "/p6")
    assert isinstance(body["throttledS"], float)
    assert 0.5 <= body["throttledS"] <= elapsed
    assert throttled_total(client) == 1.0
    assert "scd_throttle_delay_seconds 0.5" in client.get("/metrics").text

    latest = body["offset"]
    assert isinstance(latest, int)
    author.announce(latest - 2)  # 2 items: at the limit, not beyond
    wait_for(lambda: agent.throttle_queue_size == 2, what="the author catching up")
    body, _ = distribute(client, "/p7")
    assert body["throttledS"] == 0.0
    assert throttled_total(client) == 1.0


def test_a_stopping_publisher_stops_holding_requests_back_and_says_how_long_it_held(
    make_agent: AgentFactory,
) -> None:
    agent: PublisherAgent = make_agent(throttle_queue_limit=1, throttle_max_delay_s=30.0)
    agent.throttle_queue_size = 2  # twice the limit: 30 s
    held: list[float] = []
    waiter = threading.Thread(target=lambda: held.append(agent.hold_back()))
    waiter.start()
    time.sleep(0.3)
    agent.stop()
    waiter.join(5.0)
    assert not waiter.is_alive(), "hold_back kept waiting after stop()"
    assert len(held) == 1
    assert 0.3 <= held[0] < 5.0
