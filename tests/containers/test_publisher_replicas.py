"""The compose cluster's two publisher replicas are one agent to an operator: after packages
distributed through both, with one subscriber paused through the replica that does not lead (so
that its queue holds them), ``/agent``, ``/queues`` and the console's package list read the same
on either replica once both have read the status and discovery topics; and again once the
subscriber was resumed through the leader and imported them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from publisher.api.forward import SERVED_BY_HEADER
from publisher.client import PublisherClient
from tests.containers.compose import PUBLISHERS, SUBSCRIBERS, ComposeCluster
from tests.containers.conftest import Report
from tests.containers.driving import wait_imported
from tests.waiting import wait_for

pytestmark = [pytest.mark.containers, pytest.mark.slow]

HTTP_TIMEOUT_S = 60.0
# A subscriber announces its state every 10 s and a publisher rebuilds its view every 5 s; a
# store that has not opened yet (the module alone, right after `up`) takes minutes.
VIEW_TIMEOUT_S = 120.0
FIRST_IMPORT_TIMEOUT_S = 600.0
ELECTION_TIMEOUT_S = 60.0
PACKAGES = 3
ROOT = "/replicas-view"
# What the replicas must agree on (lag and ages are times of each replica's own clock).
AGENT_FIELDS = ("agentName", "state", "queues", "items")
QUEUE_FIELDS = (
    "name",
    "subscriberAgentName",
    "state",
    "size",
    "headOffset",
    "processedOffset",
    "headAttempts",
    "errorQueueSize",
)
ROW_FIELDS = ("offset", "packageId", "action", "paths", "size", "imported", "failed")

View = dict[str, Any]


def _view(http: httpx.Client) -> View:
    agent = http.get("/agent").raise_for_status().json()
    queues = http.get("/queues", params={"limit": 1000}).raise_for_status().json()
    packages = http.get("/console/api/packages", params={"limit": 20}).raise_for_status().json()
    return {
        "agent": {k: agent[k] for k in AGENT_FIELDS},
        "queues": {q["subscriberAgentName"]: {k: q[k] for k in QUEUE_FIELDS} for q in queues},
        "nextOffset": packages["nextOffset"],
        "subscribers": packages["subscribers"],
        "packages": {r["offset"]: {k: r[k] for k in ROW_FIELDS} for r in packages["packages"]},
    }


@pytest.fixture
def replicas(compose: ComposeCluster) -> Iterator[dict[str, httpx.Client]]:
    ep = compose.endpoints()
    assert len(ep.publisher_urls) == len(PUBLISHERS), ep.publisher_urls
    clients = {
        service: PublisherClient(ep.url_of(service), ep.token, timeout_s=HTTP_TIMEOUT_S).http
        for service in PUBLISHERS
    }
    try:
        yield clients
    finally:
        for client in clients.values():
            client.close()


def _same(
    clients: dict[str, httpx.Client], holds: Callable[[View], bool]
) -> Callable[[], View | None]:
    """A wait's condition: both replicas show one view, and it ``holds``."""

    def check() -> View | None:
        first, *others = (_view(http) for http in clients.values())
        return first if all(v == first for v in others) and holds(first) else None

    return check


def _served_by(answer: httpx.Response, leader: str) -> dict[str, Any]:
    assert answer.status_code == 200, f"{answer.status_code} {answer.text[:300]}"
    assert answer.headers.get(SERVED_BY_HEADER) == leader, answer.headers
    data: dict[str, Any] = answer.json()
    return data


@pytest.mark.timeout(FIRST_IMPORT_TIMEOUT_S + 4 * VIEW_TIMEOUT_S)
def test_both_replicas_show_the_same_agent_queues_and_packages(
    compose: ComposeCluster,
    replicas: dict[str, httpx.Client],
    report: Report,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def leaders() -> list[str] | None:
        agents = [http.get("/agent").json() for http in replicas.values()]
        assert {a["agentName"] for a in agents} == {"publish"}, agents
        found = [str(a["instanceId"]) for a in agents if a["leader"]]
        return found if len(found) == 1 else None

    (leader,) = wait_for(leaders, ELECTION_TIMEOUT_S, "one leader among the replicas")
    follower = next(s for s in PUBLISHERS if s != leader)
    # A first package, imported everywhere: the module alone, right after `up`, waits here for
    # the subscribers' stores to open (minutes); the phases below then take seconds.
    warm = {"action": "ADD", "paths": [ROOT], "nodes": [{"path": ROOT}]}
    offset = int(_served_by(replicas[follower].post("/distribute", json=warm), leader)["offset"])
    wait_imported(compose, offset, time.monotonic(), FIRST_IMPORT_TIMEOUT_S)
    wait_for(
        _same(replicas, lambda v: sorted(v["queues"]) == sorted(SUBSCRIBERS)),
        VIEW_TIMEOUT_S,
        "both replicas to show the three subscribers' queues",
    )
    held = SUBSCRIBERS[0]
    name = _view(replicas[leader])["queues"][held]["name"]
    timings: dict[str, float] = {}
    paused = False
    try:
        # Through the replica that does not lead: forwarded to the leader, which answers.
        _served_by(replicas[follower].post(f"/queues/{name}/pause"), leader)
        paused = True
        started = time.monotonic()
        wait_for(
            _same(replicas, lambda v: v["queues"][held]["state"] == "PAUSED"),
            VIEW_TIMEOUT_S,
            f"both replicas to show {held} paused",
        )
        timings["paused_shown_s"] = round(time.monotonic() - started, 1)

        offsets = []
        for i in range(PACKAGES):
            http = replicas[PUBLISHERS[i % len(PUBLISHERS)]]
            body = {"action": "ADD", "paths": [f"{ROOT}/p{i}"], "nodes": [{"path": f"{ROOT}/p{i}"}]}
            offsets.append(int(_served_by(http.post("/distribute", json=body), leader)["offset"]))
        first, last = offsets[0], offsets[-1]
        started = time.monotonic()

        def held_back(v: View) -> bool:
            queues, rows = v["queues"], v["packages"]
            others = [queues[s] for s in SUBSCRIBERS if s != held]
            return (
                queues[held]["size"] == PACKAGES
                and queues[held]["headOffset"] == first
                and queues[held]["processedOffset"] < first
                and all(q["size"] == 0 and q["processedOffset"] >= last for q in others)
                and all(rows.get(o, {}).get("imported") == len(others) for o in offsets)
            )

        while_paused = wait_for(
            _same(replicas, held_back),
            VIEW_TIMEOUT_S,
            f"both replicas to show {held} holding {PACKAGES} packages, the others none",
        )
        timings["queues_agree_s"] = round(time.monotonic() - started, 1)

        # Through the leader itself this time.
        _served_by(replicas[leader].post(f"/queues/{name}/resume"), leader)
        paused = False
        started = time.monotonic()

        def caught_up(v: View) -> bool:
            queues, rows = v["queues"], v["packages"]
            return (
                v["agent"]["items"] == 0
                and all(q["size"] == 0 and q["processedOffset"] >= last for q in queues.values())
                and all(rows.get(o, {}).get("imported") == len(SUBSCRIBERS) for o in offsets)
            )

        resumed = wait_for(
            _same(replicas, caught_up),
            VIEW_TIMEOUT_S,
            f"both replicas to show {held} resumed and every queue empty",
        )
        timings["resumed_agree_s"] = round(time.monotonic() - started, 1)
    finally:
        if paused:
            replicas[leader].post(f"/queues/{name}/resume")
    assert while_paused["agent"]["items"] == PACKAGES, while_paused["agent"]
    assert resumed["queues"][held]["state"] != "PAUSED", resumed["queues"][held]
    report.say(
        capsys,
        "publisher replicas",
        {
            "leader": leader,
            "offsets": offsets,
            "held_queue": while_paused["queues"][held],
            **timings,
        },
    )
