"""/health, /ready and /metrics of a daemon's agents (subscriber/fleet/view.py) on a real
endpoint: one agent answers exactly as a single-agent daemon did; with several, readiness
needs every agent, the body names each, an agent whose thread died shows FAILED, and the
metrics of all agents are one valid exposition with an ``agent`` label per agent."""

from __future__ import annotations

import contextlib
import threading
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from runtime.supervisor import THREAD_RESTARTS, Backoff, Supervisor
from subscriber.errors import Stopped
from subscriber.fleet.commit_slots import CommitSlots
from subscriber.fleet.view import AgentsView
from subscriber.http import Health, HealthServer
from subscriber.metrics import SubscriberMetrics
from subscriber.reads.model import ReadModel
from tests.waiting import wait_for


class FakeAgent:
    def __init__(self, name: str, offset: int | None, state: str = "IDLE") -> None:
        self.name = name
        self.offset = offset
        self.state = state
        self.answer = (True, "ready (idle): idle for 10.0 s")
        self.metrics = SubscriberMetrics(name)
        self.supervisor = Supervisor()
        self.reads: ReadModel | None = None

    def health(self) -> Health:
        return Health(
            agent=self.name,
            instance_id=f"inst-{self.name}",
            processed_offset=self.offset,
            state=self.state,
            holds_position=True,
            start_offset=0,
        )

    def ready(self) -> tuple[bool, str]:
        return self.answer


def serve(agents: list[FakeAgent]) -> HealthServer:
    view = AgentsView(agents)
    return HealthServer(view.health, view.ready, view.metrics, port=0)


def test_one_agent_answers_as_the_single_agent_daemon_did() -> None:
    agent = FakeAgent("solo", 41)
    with serve([agent]) as server:
        body = httpx.get(f"{server.url}/health").json()
        ready = httpx.get(f"{server.url}/ready")
    top = {k: v for k, v in body.items() if k != "agents"}
    assert top == agent.health().model_dump(mode="json", by_alias=True)
    assert [a["agent"] for a in body["agents"]] == ["solo"]
    assert body["agents"][0]["ready"] is True
    assert (ready.status_code, ready.json()) == (
        200,
        {"ready": True, "reason": "ready (idle): idle for 10.0 s"},
    )


def test_ready_only_when_every_agent_is_and_the_body_names_each() -> None:
    a, b, c = FakeAgent("a", 10), FakeAgent("b", 7, "RUNNING"), FakeAgent("c", None, "STARTING")
    c.answer = (False, "not ready: importing")
    with serve([a, b, c]) as server:
        ready = httpx.get(f"{server.url}/ready")
        assert ready.status_code == 503
        assert ready.json()["reason"] == "1 of 3 agents not ready; c: not ready: importing"
        body = httpx.get(f"{server.url}/health").json()
        assert body["agent"] == "3 agents"
        assert body["processedOffset"] is None  # c has none yet: no lower bound
        assert body["state"] == "STARTING"
        assert body["holdsPosition"] is True
        assert {x["agent"]: (x["state"], x["ready"]) for x in body["agents"]} == {
            "a": ("IDLE", True),
            "b": ("RUNNING", True),
            "c": ("STARTING", False),
        }
        c.answer, c.offset, c.state = (True, "ready (forced)"), 3, "IDLE"
        ready = httpx.get(f"{server.url}/ready")
        assert (ready.status_code, ready.json()["reason"]) == (200, "all 3 agents ready")
        body = httpx.get(f"{server.url}/health").json()
        assert (body["processedOffset"], body["state"]) == (3, "RUNNING")


def test_an_agent_whose_thread_failed_shows_failed_and_the_others_do_not() -> None:
    a, b = FakeAgent("a", 1), FakeAgent("b", 2)
    gone = threading.Event()

    def crash() -> None:
        gone.set()
        raise RuntimeError("store gone")

    b.supervisor.spawn("b-import", crash, backoff=Backoff(initial_s=60))
    assert gone.wait(5)
    time.sleep(0.1)  # the supervisor marks it down after the exception
    with serve([a, b]) as server:
        body = httpx.get(f"{server.url}/health").json()
    b.supervisor.stop(5)
    states = {x["agent"]: (x["state"], x["threads"]) for x in body["agents"]}
    assert states["a"] == ("IDLE", "0 threads running")
    assert states["b"][0] == "FAILED"
    assert "b-import (RuntimeError, 1 restarts)" in states["b"][1]
    assert body["state"] == "FAILED"


def test_metrics_of_all_agents_form_one_valid_exposition() -> None:
    agents = [FakeAgent(name, 0) for name in ("a", "b", "c")]
    THREAD_RESTARTS.labels("view-test").inc()  # process-wide: in every agent's registry
    slots = CommitSlots(1)  # the daemon's, watched by each agent's import loop
    for agent in agents:
        agent.metrics.watch_commit_slots(slots)
    for i, agent in enumerate(agents):
        agent.metrics.offsets(processed=10 * i, lag=99 - 10 * i)
    stop = threading.Event()
    with slots.hold(starting=False):
        waiter = threading.Thread(target=_wait_for_a_slot, args=(slots, stop), daemon=True)
        waiter.start()
        wait_for(lambda: slots.waiting == 1, 10)
        with serve(agents) as server:
            text = httpx.get(f"{server.url}/metrics").text
        stop.set()
        waiter.join(10)
    families = {f.name: f for f in text_string_to_metric_families(text)}  # parses: valid
    processed = {s.labels["agent"]: s.value for s in families["scd_processed_offset"].samples}
    assert processed == {"a": 0.0, "b": 10.0, "c": 20.0}
    assert text.count("# TYPE scd_processed_offset gauge") == 1
    assert text.count("# TYPE scd_thread_restarts_total counter") == 1
    restarts = [s for s in families["scd_thread_restarts"].samples if s.name.endswith("_total")]
    assert [s.labels["thread"] for s in restarts].count("view-test") == 1
    # The daemon's commit slots: once, without an agent label, read when scraped.
    assert [(s.labels, s.value) for s in families["scd_commit_slot_waiters"].samples] == [({}, 1.0)]


def _wait_for_a_slot(slots: CommitSlots, stop: threading.Event) -> None:
    with contextlib.suppress(Stopped), slots.hold(starting=True, stop=stop):
        pass
