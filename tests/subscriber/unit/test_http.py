"""The health endpoint on a real server bound to a free port."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest

import subscriber.http
from runtime.errors import ServerError
from subscriber.http import Health, HealthServer
from subscriber.metrics import SubscriberMetrics


class FakeAgent:
    def __init__(self) -> None:
        self.offset: int | None = None
        self.ready = (False, "not ready: importing")
        self.metrics = SubscriberMetrics("sub1")

    def health(self) -> Health:
        return Health(
            agent="sub1", instance_id="inst-1", processed_offset=self.offset, state="RUNNING"
        )

    def check(self) -> tuple[bool, str]:
        return self.ready


@pytest.fixture
def agent() -> FakeAgent:
    return FakeAgent()


@pytest.fixture
def server(agent: FakeAgent) -> Iterator[HealthServer]:
    with HealthServer(agent.health, agent.check, agent.metrics.render, port=0) as running:
        yield running


def test_health_reports_agent_state(server: HealthServer, agent: FakeAgent) -> None:
    assert server.port > 0
    response = httpx.get(f"{server.url}/health")
    assert response.status_code == 200
    assert response.json() == {
        "agent": "sub1",
        "instanceId": "inst-1",
        "processedOffset": None,
        "state": "RUNNING",
        "role": "active",
        "holdsPosition": False,
        "startOffset": None,
        "canaryWait": None,
        "start": {},
    }
    agent.offset = 41
    assert httpx.get(f"{server.url}/health").json()["processedOffset"] == 41


def test_ready_is_503_until_ready(server: HealthServer, agent: FakeAgent) -> None:
    response = httpx.get(f"{server.url}/ready")
    assert response.status_code == 503
    assert response.json() == {"ready": False, "reason": "not ready: importing"}
    agent.ready = (True, "ready (idle): idle for 10.0 s")
    response = httpx.get(f"{server.url}/ready")
    assert response.status_code == 200
    assert response.json()["reason"] == "ready (idle): idle for 10.0 s"


def test_metrics_in_prometheus_text(server: HealthServer, agent: FakeAgent) -> None:
    agent.metrics.offsets(processed=5, lag=4)
    response = httpx.get(f"{server.url}/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert 'scd_lag{agent="sub1"} 4.0' in response.text


def test_port_in_use_fails_start_clearly(agent: FakeAgent) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        server = HealthServer(agent.health, agent.check, agent.metrics.render, port=port)
        with pytest.raises(ServerError, match=str(port)):
            server.start()


def test_start_failures_have_one_name() -> None:
    """A failed start raises runtime.http_server.ServerError, under no second name."""
    assert not hasattr(subscriber.http, "HealthServerError")


def test_stop_releases_the_port(agent: FakeAgent) -> None:
    first = HealthServer(agent.health, agent.check, agent.metrics.render)
    first.start()
    port = first.port
    first.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/health")
    with HealthServer(agent.health, agent.check, agent.metrics.render, port=port) as again:
        assert httpx.get(f"{again.url}/health").status_code == 200
