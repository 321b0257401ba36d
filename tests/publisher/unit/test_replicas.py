"""Publisher replicas on the embedded journal (publisher/replicas.py, publisher/api/forward.py):
two instances of one agent behind a round-robin balancer, each serving its API over HTTP.
Every acknowledged package is on the log once, numbered in one sequence in log order; requests
to the follower reach the leader; a request is never bounced between instances."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from journal.api import Position
from journal.errors import JournalUnavailable
from journal.sqlite.journal import SqliteJournal
from journal.wire.messages import PackageMessage, decode
from publisher.agent import PublisherAgent
from publisher.api import create_app
from publisher.api.forward import FORWARDED_HEADER, SERVED_BY_HEADER, ForwardMiddleware
from publisher.client import PublisherClient
from publisher.replicas import LeaderDirectory, parse_announcement
from runtime.http_server import AppServer
from tests.publisher.conftest import TOKEN, AgentFactory
from tests.services import free_port
from tests.waiting import wait_for

AGENT = "publish"
REQUESTS = 120
CLIENTS = 4


def leading(agent: PublisherAgent) -> bool:
    return agent.leadership.is_leader


@dataclass
class Replica:
    agent: PublisherAgent
    server: AppServer
    http: httpx.Client


@pytest.fixture
def replicas(make_agent: AgentFactory) -> Iterator[list[Replica]]:
    started: list[Replica] = []
    for instance in ("pub-a", "pub-b"):
        port = free_port()
        agent = make_agent(
            instance_id=instance, port=port, advertised_url=f"http://127.0.0.1:{port}"
        )
        if instance == "pub-a":  # the first one leads: the test knows which
            wait_for(functools.partial(leading, agent), what="pub-a leading")
        server = AppServer(create_app(agent), port=port, name=instance)
        server.start()
        http = PublisherClient(server.url, TOKEN, timeout_s=30).http
        started.append(Replica(agent, server, http))
    yield started
    for r in started:
        r.http.close()
        r.server.stop()


def packages(journal: SqliteJournal) -> list[PackageMessage]:
    found: list[PackageMessage] = []
    with journal.consumer("scd.package", Position.earliest()) as consumer:
        while records := consumer.poll(0.2, max_records=10_000):
            found.extend(
                m for r in records if isinstance(m := decode(r.headers, r.value), PackageMessage)
            )
    return found


def test_round_robin_over_two_instances_loses_nothing_and_numbers_once(
    replicas: list[Replica], journal: SqliteJournal
) -> None:
    follower = replicas[1]
    wait_for(lambda: follower.agent.directory.leader() is not None, what="pub-a announced")

    def distribute(i: int) -> tuple[str, int, str]:
        response = replicas[i % 2].http.post(
            "/distribute", json={"action": "DELETE", "paths": [f"/p{i}"]}
        )
        assert response.status_code == 200, response.text
        body = response.json()
        return body["packageId"], body["offset"], response.headers[SERVED_BY_HEADER]

    with ThreadPoolExecutor(CLIENTS) as pool:
        answers = list(pool.map(distribute, range(REQUESTS)))
    assert {served for _, _, served in answers} == {"pub-a"}
    logged = packages(journal)
    acknowledged = {pkg_id: offset for pkg_id, offset, _ in answers}
    assert len(acknowledged) == REQUESTS
    assert sorted(m.pkg_id for m in logged) == sorted(acknowledged)
    # One sequence in log order: a subscriber admits every record (no replay, no gap).
    assert [m.sequence for m in logged] == list(range(1, REQUESTS + 1))
    assert follower.agent.leadership.is_leader is False


def test_the_follower_relays_the_leaders_refusals(replicas: list[Replica]) -> None:
    _, follower = replicas
    wait_for(lambda: follower.agent.directory.leader() is not None, what="pub-a announced")
    response = follower.http.post("/distribute", json={"action": "ADD", "paths": ["relative"]})
    assert response.status_code == 400
    assert response.headers[SERVED_BY_HEADER] == "pub-a"
    assert "detail" in response.json()
    # Without the token the follower refuses on its own: nothing is forwarded.
    anonymous = httpx.post(f"{follower.server.url}/distribute", json={"action": "TEST"})
    assert anonymous.status_code == 401
    assert SERVED_BY_HEADER not in anonymous.headers


def test_a_forwarded_request_is_never_forwarded_again(replicas: list[Replica]) -> None:
    _, follower = replicas
    response = follower.http.post(
        "/distribute",
        json={"action": "TEST", "paths": ["/x"]},
        headers={FORWARDED_HEADER: "pub-c"},
    )
    assert response.status_code == 503
    assert response.headers["retry-after"]
    assert "does not lead" in response.json()["detail"]


def test_when_the_leader_stops_the_other_takes_over_and_numbering_goes_on(
    replicas: list[Replica], journal: SqliteJournal
) -> None:
    leader, follower = replicas
    wait_for(lambda: follower.agent.directory.leader() is not None, what="pub-a announced")
    first = follower.http.post("/distribute", json={"action": "DELETE", "paths": ["/a"]})
    assert first.status_code == 200, first.text
    leader.server.stop()
    leader.agent.stop()  # hands leadership over
    # Sent at once: it waits for the election instead of failing.
    second = follower.http.post("/distribute", json={"action": "DELETE", "paths": ["/b"]})
    assert second.status_code == 200, second.text
    assert second.headers[SERVED_BY_HEADER] == "pub-b"
    assert [m.sequence for m in packages(journal)] == [1, 2]


@pytest.mark.parametrize(
    "value",
    [
        b"",
        b"null",
        b"[]",
        b'{"agent": "publish"}',
        b'{"agent": "other", "instance": "i", "url": "http://h:1", "announcedMs": 1}',
        b'{"agent": "publish", "instance": "i", "url": "file:///etc", "announcedMs": 1}',
        b'{"agent": "publish", "instance": 1, "url": "http://h:1", "announcedMs": 1}',
        b"{" * 100_000,
    ],
)
def test_a_malformed_announcement_names_no_leader(value: bytes) -> None:
    assert parse_announcement(value, AGENT) is None


def test_an_announcement_names_its_leader() -> None:
    value = b'{"agent": "publish", "instance": "i", "url": "http://h:1/", "announcedMs": 5}'
    address = parse_announcement(value, AGENT)
    assert address is not None
    assert (address.instance_id, address.url, address.announced_ms) == ("i", "http://h:1", 5)


class UnreachableJournal(SqliteJournal):
    """The embedded journal, cut off: every read of an offset fails as Kafka's would."""

    def latest_offset(self, topic: str, partition: int = 0) -> int:
        raise JournalUnavailable(f"Kafka at 127.0.0.1:1 is unreachable ({topic}-{partition})")


def test_a_follower_cut_off_the_journal_says_why_no_leader_answers(tmp_path: Path) -> None:
    journal = UnreachableJournal(tmp_path / "journal.db")
    directory = LeaderDirectory(journal, "scd.leader", AGENT, "pub-b", "http://127.0.0.1:1")
    app = ForwardMiddleware(FastAPI(), directory, lambda: False, 5.0, election_wait_s=0.3)
    with TestClient(app) as client:
        response = client.post("/distribute", json={"action": "DELETE", "paths": ["/a"]})
    assert response.status_code == 503
    assert response.headers["retry-after"]
    detail = response.json()["detail"]
    assert "no leader of agent publish" in detail
    cause = "the journal could not be read: Kafka at 127.0.0.1:1 is unreachable (scd.leader-0)"
    assert cause in detail
