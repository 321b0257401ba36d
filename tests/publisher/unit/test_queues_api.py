"""Queues, error queues, clear, subscribers and agent state over REST, with simulated
subscribers on the embedded journal (Sling scenarios 3, 4 and 6)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from journal.api import Position
from journal.settings import JournalSettings, TopicSettings
from journal.sqlite.journal import SqliteJournal
from journal.topics import topic_specs
from journal.wire.messages import CommandMessage, PackageMessage, decode
from publisher.agent import PublisherAgent
from publisher.api import create_app
from publisher.client import PublisherClient
from tests.publisher.packages import put_packages
from tests.publisher.simulate import SimulatedSubscriber
from tests.waiting import wait_for

TOPICS = TopicSettings()


def subscriber(journal: SqliteJournal, sling_id: str, **kw: Any) -> SimulatedSubscriber:
    return SimulatedSubscriber(journal, TOPICS, sling_id, **kw)


def distribute(client: TestClient, count: int) -> list[int]:
    api = PublisherClient(http=client)
    return [
        api.distribute({"action": "DELETE", "paths": [f"/p{i}"]})["offset"] for i in range(count)
    ]


def queues(client: TestClient) -> dict[str, dict[str, Any]]:
    response = client.get("/queues")
    assert response.status_code == 200
    return {q["name"]: q for q in response.json()}


def wait_queue(client: TestClient, name: str, **expected: Any) -> dict[str, Any]:
    def matches() -> dict[str, Any] | None:
        queue = queues(client).get(name)
        if queue and all(queue[k] == v for k, v in expected.items()):
            return queue
        return None

    result: dict[str, Any] = wait_for(matches, what=f"queue {name} with {expected}")
    return result


def commands(journal: SqliteJournal) -> list[CommandMessage]:
    if (
        journal.latest_offset(TOPICS.command, 0)
        + sum(journal.latest_offset(TOPICS.command, p) for p in range(1, TOPICS.command_partitions))
        == 0
    ):
        return []
    with journal.consumer(TOPICS.command, Position.earliest()) as consumer:
        records = consumer.poll(0.2)
    return [decode(r.headers, r.value) for r in records]  # type: ignore[misc]


def test_two_subscribers_queues_appear_and_drain(
    client: TestClient, journal: SqliteJournal
) -> None:
    offsets = distribute(client, 3)
    a, b = subscriber(journal, "a"), subscriber(journal, "b")
    a.announce(-1)
    b.announce(offsets[0])
    qa = wait_queue(client, "a-subscriber", size=3)
    qb = wait_queue(client, "b-subscriber", size=2)
    assert qa["state"] == "RUNNING"
    assert qa["headOffset"] == offsets[0]
    assert qb["headOffset"] == offsets[1]
    assert qb["processedOffset"] == offsets[0]
    assert client.get("/agent").json()["state"] == "RUNNING"
    a.announce(offsets[-1])
    b.announce(offsets[-1])
    wait_queue(client, "a-subscriber", size=0, state="IDLE")
    wait_queue(client, "b-subscriber", size=0, state="IDLE")
    agent = client.get("/agent").json()
    assert agent["state"] == "IDLE"
    assert agent["queues"] == 2
    assert agent["leader"] is True
    subs = client.get("/subscribers").json()
    assert [s["queueName"] for s in subs] == ["a-subscriber", "b-subscriber"]
    assert subs[0]["states"] == [
        {"pubAgentName": "publish", "offset": offsets[-1], "retries": 0, "sequence": 0}
    ]
    assert subs[0]["remote"] is False


def test_head_failing_repeatedly_blocks_the_queue_and_the_agent(
    client: TestClient, journal: SqliteJournal
) -> None:
    offsets = distribute(client, 2)
    s = subscriber(journal, "s")
    s.announce(-1, retries=2)
    wait_queue(client, "s-subscriber", state="RUNNING", headAttempts=2)
    s.announce(-1, retries=3)
    wait_queue(client, "s-subscriber", state="BLOCKED", headAttempts=3)
    assert client.get("/agent").json()["state"] == "BLOCKED"
    s.log_error(offsets[0], "disk full")
    page = wait_for(
        lambda: (p := client.get("/queues/s-subscriber").json())["items"][0]["lastError"] and p
    )
    head, second = page["items"]
    assert head["id"] == f"scd.package-0@{offsets[0]}"
    assert head["attempts"] == 3
    assert head["lastError"]["message"] == "disk full"
    assert second["attempts"] == 0
    assert head["action"] == "DELETE"
    assert head["paths"] == ["/p0"]
    assert head["size"] > 0


def test_subscriber_without_state_for_this_agent_has_an_idle_queue(
    client: TestClient, journal: SqliteJournal
) -> None:
    distribute(client, 1)
    subscriber(journal, "n").announce(None)
    queue = wait_queue(client, "n-subscriber")
    assert queue["size"] == 0
    assert queue["state"] == "IDLE"
    assert queue["processedOffset"] is None
    assert client.get("/queues/n-subscriber").json()["items"] == []


def test_items_are_paged(client: TestClient, journal: SqliteJournal) -> None:
    offsets = distribute(client, 7)
    subscriber(journal, "s").announce(offsets[1])
    wait_queue(client, "s-subscriber", size=5)
    page = client.get("/queues/s-subscriber", params={"skip": 2, "limit": 2}).json()
    assert page["total"] == 5
    assert [i["offset"] for i in page["items"]] == offsets[4:6]
    assert client.get("/queues/s-subscriber", params={"skip": 50}).json()["items"] == []


@pytest.mark.parametrize(
    ("params", "status"),
    [({"skip": -1}, 422), ({"limit": 0}, 422), ({"limit": 100000}, 422), ({"skip": "x"}, 422)],
)
def test_bad_paging_is_refused(
    client: TestClient, journal: SqliteJournal, params: dict[str, Any], status: int
) -> None:
    subscriber(journal, "s").announce(-1)
    wait_queue(client, "s-subscriber")
    assert client.get("/queues/s-subscriber", params=params).status_code == status


def test_unknown_queue_is_404(client: TestClient) -> None:
    for path in ["/queues/nope", "/queues/nope/errors"]:
        response = client.get(path)
        assert response.status_code == 404
        assert "nope" in response.json()["detail"]
    response = client.post("/queues/nope/clear", json={"mode": "all"})
    assert response.status_code == 404


def test_error_queue_from_removed_failed_statuses_with_last_errors(
    client: TestClient, journal: SqliteJournal
) -> None:
    offsets = distribute(client, 3)
    s = subscriber(journal, "e", max_retries=1)
    s.log_error(offsets[1], "first try failed")
    s.log_error(offsets[1], "second try failed")
    s.failed(offsets[1])
    subscriber(journal, "other", max_retries=1, pub_agent_name="another-agent").failed(offsets[0])
    s.announce(offsets[2])
    queue = wait_queue(client, "e-subscriber", errorQueueSize=1)
    assert queue["errorQueue"] == "e-subscriber-error"
    assert queue["maxRetries"] == 1
    page = client.get("/queues/e-subscriber/errors").json()
    (item,) = page["items"]
    assert item["offset"] == offsets[1]
    assert item["attempts"] == 2
    assert item["lastError"]["message"] == "second try failed"
    assert item["packageId"] is not None
    assert page["queue"] == "e-subscriber-error"


def test_blocking_subscriber_error_queue_shows_its_permanent_failures(
    client: TestClient, journal: SqliteJournal
) -> None:
    offsets = distribute(client, 2)
    b = subscriber(journal, "b", max_retries=-1)
    b.announce(-1)
    queue = wait_queue(client, "b-subscriber")
    assert queue["errorQueue"] == "b-subscriber-error"
    assert queue["errorQueueSize"] == 0
    assert client.get("/queues/b-subscriber/errors").json()["items"] == []
    # A package it can never import: skipped at once, even though it blocks on transient errors.
    b.log_error(offsets[0], "permanent: checksum mismatch")
    b.failed(offsets[0])
    b.announce(offsets[0])
    wait_queue(client, "b-subscriber", errorQueueSize=1, size=1)
    page = client.get("/queues/b-subscriber/errors").json()
    (item,) = page["items"]
    assert page["total"] == 1
    assert item["offset"] == offsets[0]
    assert item["attempts"] == 1
    assert item["lastError"]["message"] == "permanent: checksum mismatch"
    assert 'scd_error_queue_size{queue="b-subscriber-error"} 1.0' in client.get("/metrics").text


def test_queues_and_subscribers_are_paged_with_the_total_in_a_header(
    client: TestClient, journal: SqliteJournal
) -> None:
    for name in "edcba":
        subscriber(journal, name).announce(-1)
    wait_for(lambda: len(queues(client)) == 5, what="5 queues")
    for path in ["/queues", "/subscribers"]:
        response = client.get(path, params={"skip": 1, "limit": 2})
        assert response.status_code == 200
        assert response.headers["x-total-count"] == "5"
        key = "name" if path == "/queues" else "queueName"
        assert [q[key] for q in response.json()] == ["b-subscriber", "c-subscriber"]
        assert client.get(path, params={"skip": 5}).json() == []
        assert client.get(path, params={"limit": 1001}).status_code == 422
    assert client.get("/queues", params={"limit": 3}).headers["x-total-count"] == "5"


def test_clear_modes_send_clear_commands(client: TestClient, journal: SqliteJournal) -> None:
    offsets = distribute(client, 6)
    s = subscriber(journal, "c", agent_name="sub-c")
    s.announce(-1)
    wait_queue(client, "c-sub-c", size=6)

    def clear(body: dict[str, Any]) -> dict[str, Any]:
        response = client.post("/queues/c-sub-c/clear", json=body)
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()
        return result

    assert clear({"mode": "head"})["clearOffset"] == offsets[0]
    assert clear({"mode": "first", "count": 2}) == {
        "queue": "c-sub-c",
        "removed": 2,
        "clearOffset": offsets[1],
        "commandOffset": clear_offset_of(journal, 1),
    }
    assert clear({"mode": "upTo", "offset": offsets[3]})["removed"] == 4
    assert clear({"mode": "upTo", "offset": 10**6})["clearOffset"] == offsets[-1]
    assert clear({"mode": "all"})["removed"] == 6
    sent = commands(journal)
    assert [c.clear_command.offset for c in sent] == [
        offsets[0],
        offsets[1],
        offsets[3],
        offsets[5],
        offsets[5],
    ]
    # Each carries the number of its last package, which a subscriber obeys instead of the
    # offset (a subscriber of another region's mirror has other offsets: docs/regions.md).
    numbers = package_numbers(journal)
    assert [c.clear_command.sequence for c in sent] == [
        numbers[offsets[i]] for i in (0, 1, 3, 5, 5)
    ]
    assert len(set(numbers.values())) == 6
    assert {(c.sub_sling_id, c.sub_agent_name, c.pub_agent_name) for c in sent} == {
        ("c", "sub-c", "publish")
    }
    # The subscriber applied the clear: its queue is empty, and clearing again sends nothing.
    s.announce(offsets[-1])
    wait_queue(client, "c-sub-c", size=0)
    assert clear({"mode": "all"}) == {
        "queue": "c-sub-c",
        "removed": 0,
        "clearOffset": None,
        "commandOffset": None,
    }
    assert len(commands(journal)) == 5


def test_a_clear_over_a_package_nobody_numbered_goes_by_offset(
    client: TestClient, journal: SqliteJournal
) -> None:
    """A foreign writer's package carries no number: a clear that removes it carries none
    either (the subscriber then obeys its offset), one that stops before it keeps its number."""
    first = distribute(client, 2)
    (foreign,) = put_packages(journal, 1)  # no sequence number
    last = distribute(client, 1)
    s = subscriber(journal, "c", agent_name="sub-c")
    s.announce(-1)
    wait_queue(client, "c-sub-c", size=4)
    for body in ({"mode": "first", "count": 2}, {"mode": "all"}):
        response = client.post("/queues/c-sub-c/clear", json=body)
        assert response.status_code == 200, response.text
    numbered, by_offset = commands(journal)[-2:]
    assert numbered.clear_command.offset == first[1]
    assert numbered.clear_command.sequence == package_numbers(journal)[first[1]] > 0
    assert by_offset.clear_command.offset == last[0] > foreign
    assert by_offset.clear_command.sequence == 0
    s.announce(first[1])  # the subscriber applied the first: the rest starts at the foreign one
    wait_queue(client, "c-sub-c", size=2)
    response = client.post("/queues/c-sub-c/clear", json={"mode": "head"})
    assert response.json()["clearOffset"] == foreign
    assert commands(journal)[-1].clear_command.sequence == 0


def package_numbers(journal: SqliteJournal) -> dict[int, int]:
    """Offset -> sequence number of the packages distributed."""
    with journal.consumer(TOPICS.package, Position.earliest()) as consumer:
        records = consumer.poll(0.2)
    messages = [(r.offset, decode(r.headers, r.value)) for r in records]
    return {o: msg.sequence for o, msg in messages if isinstance(msg, PackageMessage)}


def clear_offset_of(journal: SqliteJournal, index: int) -> int | None:
    """The offset (in its partition) of the index-th command sent."""
    with journal.consumer(TOPICS.command, Position.earliest()) as consumer:
        records = consumer.poll(0.2)
    return records[index].offset if len(records) > index else None


def test_clear_first_without_a_count_clears_every_item(
    client: TestClient, journal: SqliteJournal
) -> None:
    offsets = distribute(client, 3)
    subscriber(journal, "c").announce(-1)
    wait_queue(client, "c-subscriber", size=3)
    response = client.post("/queues/c-subscriber/clear", json={"mode": "first"})
    assert response.status_code == 200, response.text
    assert (response.json()["removed"], response.json()["clearOffset"]) == (3, offsets[-1])
    assert [c.clear_command.offset for c in commands(journal)] == [offsets[-1]]


# Clears whose count or offset does not fit the mode: (body, status, part of the reason).
BAD_CLEARS: list[tuple[dict[str, Any], int, str]] = [
    ({"mode": "first", "count": 0}, 422, "greater"),
    ({"mode": "upTo"}, 400, "needs an offset"),
    ({"mode": "upTo", "offset": -1}, 422, "greater"),
    ({"mode": "head", "count": 2}, 400, "neither"),
    ({"mode": "all", "offset": 2}, 400, "neither"),
    ({"mode": "first", "count": 1, "offset": 3}, 400, "not an offset"),
    ({"mode": "first", "offset": 3}, 400, "not an offset"),
    ({"mode": "upTo", "offset": 1, "count": 3}, 400, "not a count"),
    ({"mode": "everything"}, 422, "head"),
    ({}, 422, "mode"),
]


@pytest.mark.parametrize(("body", "status", "reason"), BAD_CLEARS)
def test_bad_clear_requests(
    client: TestClient, journal: SqliteJournal, body: dict[str, Any], status: int, reason: str
) -> None:
    subscriber(journal, "c").announce(-1)
    wait_queue(client, "c-subscriber")
    response = client.post("/queues/c-subscriber/clear", json=body)
    assert response.status_code == status, response.text
    assert reason in str(response.json()["detail"])


def test_clear_of_a_non_editable_subscriber_is_409(
    client: TestClient, journal: SqliteJournal
) -> None:
    distribute(client, 1)
    subscriber(journal, "ro", editable=False).announce(-1)
    wait_queue(client, "ro-subscriber", size=1)
    response = client.post("/queues/ro-subscriber/clear", json={"mode": "all"})
    assert response.status_code == 409
    assert "not editable" in response.json()["detail"]
    assert commands(journal) == []


def test_pause_and_resume_send_numbered_commands_and_the_queue_shows_paused(
    client: TestClient, journal: SqliteJournal
) -> None:
    offsets = distribute(client, 2)
    s = subscriber(journal, "ro", agent_name="sub-ro", editable=False)  # read-only: pausable
    s.announce(-1)
    wait_queue(client, "ro-sub-ro", size=2, state="RUNNING")
    assert client.post("/queues/nope/pause").status_code == 404
    assert client.post("/queues/ro-sub-ro/pause", headers={"Authorization": ""}).status_code == 401
    assert commands(journal) == []

    paused = client.post("/queues/ro-sub-ro/pause")
    assert paused.status_code == 200, paused.text
    assert paused.json()["queue"] == "ro-sub-ro"
    assert paused.json()["paused"] is True
    # The queue says PAUSED once the subscriber announces it, with its backlog or without.
    s.announce(-1, paused=True)
    wait_queue(client, "ro-sub-ro", size=2, state="PAUSED")
    s.announce(offsets[-1], paused=True)
    wait_queue(client, "ro-sub-ro", size=0, state="PAUSED")
    resumed = client.post("/queues/ro-sub-ro/resume")
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["paused"] is False
    s.announce(offsets[-1])
    wait_queue(client, "ro-sub-ro", size=0, state="IDLE")

    sent = commands(journal)
    assert [(c.pause_command.paused, c.HasField("clear_command")) for c in sent] == [
        (True, False),
        (False, False),
    ]
    assert {(c.sub_sling_id, c.sub_agent_name, c.pub_agent_name) for c in sent} == {
        ("ro", "sub-ro", "publish")
    }
    assert sent[0].sequence >= 1
    assert sent[1].sequence == sent[0].sequence + 1  # one numbering with the clear commands


def test_old_subscriber_sees_exactly_the_packages_logged_before_the_publisher_started(
    make_agent: Any, journal: SqliteJournal, journal_settings: JournalSettings
) -> None:
    journal.create_topics(topic_specs(journal_settings))
    put_packages(journal, 2000)
    agent: PublisherAgent = make_agent()
    client = TestClient(create_app(agent))
    assert agent.cache.size == 0
    subscriber(journal, "late").announce(-1)
    queue = wait_queue(client, "late-subscriber", size=2000)
    assert queue["headOffset"] == 0
    page = client.get("/queues/late-subscriber", params={"skip": 1990, "limit": 100}).json()
    assert [i["offset"] for i in page["items"]] == list(range(1990, 2000))


def test_metrics_show_queues_and_subscribers(client: TestClient, journal: SqliteJournal) -> None:
    distribute(client, 2)
    subscriber(journal, "m").announce(-1)
    wait_queue(client, "m-subscriber", size=2)
    text = client.get("/metrics").text
    assert 'scd_queue_size{queue="m-subscriber"} 2.0' in text
    assert "scd_subscriber_count 1.0" in text
    assert 'scd_accepted_requests_total{action="DELETE"} 2.0' in text
    assert client.get("/health").json() == {"status": "ok"}
    assert client.get("/ready").json() == {"status": "ready"}
