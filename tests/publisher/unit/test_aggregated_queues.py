"""Aggregated queues (SCD_PUBLISHER_AGGREGATE_SUBSCRIBER_QUEUES): two queues instead of one
per subscriber, over REST and in the metrics, with simulated subscribers on the embedded
journal; a clear of the editable one becomes a ClearCommand to each editable subscriber still
holding the cleared items."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from journal.sqlite.journal import SqliteJournal
from publisher.api import create_app
from publisher.queues.views import ALL_QUEUE, EDITABLE_QUEUE
from tests.publisher.conftest import AUTH, AgentFactory
from tests.publisher.unit.test_queues_api import (
    BAD_CLEARS,
    commands,
    distribute,
    queues,
    subscriber,
    wait_queue,
)
from tests.waiting import wait_for


@pytest.fixture
def client(make_agent: AgentFactory) -> TestClient:
    agent = make_agent(aggregate_subscriber_queues=True, view_refresh_s=0.05)
    return TestClient(create_app(agent), headers=AUTH)


def test_two_queues_from_the_lowest_offsets_and_blocked_when_a_member_is(
    client: TestClient, journal: SqliteJournal
) -> None:
    offsets = distribute(client, 5)
    editable_behind = subscriber(journal, "e1")
    editable_ahead = subscriber(journal, "e2")
    readonly = subscriber(journal, "r", editable=False)
    editable_behind.announce(offsets[1])
    editable_ahead.announce(offsets[3])
    readonly.announce(offsets[0], retries=3)

    editable = wait_queue(client, EDITABLE_QUEUE, size=3, processedOffset=offsets[1])
    everyone = wait_queue(client, ALL_QUEUE, size=4, processedOffset=offsets[0])
    assert set(queues(client)) == {EDITABLE_QUEUE, ALL_QUEUE}
    assert client.get("/queues").headers["X-Total-Count"] == "2"
    assert (editable["editable"], everyone["editable"]) == (True, False)
    assert (editable["headOffset"], editable["state"]) == (offsets[2], "RUNNING")
    # The read-only subscriber's head failed 3 times (the blocking threshold): the queue over
    # every subscriber is blocked, and that head's attempts are the queue's.
    assert (everyone["state"], everyone["headAttempts"]) == ("BLOCKED", 3)
    items = client.get(f"/queues/{EDITABLE_QUEUE}", params={"limit": 2}).json()
    assert items["total"] == 3
    assert [i["offset"] for i in items["items"]] == offsets[2:4]

    def metric_sizes() -> dict[str, float]:
        lines = client.get("/metrics").text.splitlines()
        return {
            name: float(line.rsplit(" ", 1)[1])
            for line in lines
            if line.startswith("scd_queue_size{")
            for name in (EDITABLE_QUEUE, ALL_QUEUE)
            if f'"{name}"' in line
        }

    assert wait_for(lambda: metric_sizes() == {EDITABLE_QUEUE: 3.0, ALL_QUEUE: 4.0} or None)
    # No per-subscriber series once aggregated.
    assert "e1-subscriber" not in client.get("/metrics").text


def test_a_clear_applies_to_every_editable_subscriber_behind_and_the_other_is_read_only(
    client: TestClient, journal: SqliteJournal
) -> None:
    offsets = distribute(client, 4)
    behind, ahead = subscriber(journal, "e1"), subscriber(journal, "e2")
    readonly = subscriber(journal, "r", editable=False)
    behind.announce(-1)
    ahead.announce(offsets[1])
    readonly.announce(-1)
    wait_queue(client, EDITABLE_QUEUE, size=4)
    wait_queue(client, ALL_QUEUE, size=4)

    answer = client.post(f"/queues/{EDITABLE_QUEUE}/clear", json={"mode": "first", "count": 3})
    assert answer.status_code == 200, answer.text
    assert (answer.json()["removed"], answer.json()["clearOffset"]) == (3, offsets[2])
    sent = {(c.sub_sling_id, c.clear_command.offset) for c in commands(journal)}
    assert sent == {("e1", offsets[2]), ("e2", offsets[2])}  # none to the read-only one

    refused = client.post(f"/queues/{ALL_QUEUE}/clear", json={"mode": "all"})
    assert refused.status_code == 409
    assert "read-only" in refused.text
    everything = client.post(f"/queues/{EDITABLE_QUEUE}/clear", json={"mode": "first"})
    assert everything.status_code == 200, everything.text
    assert (everything.json()["removed"], everything.json()["clearOffset"]) == (4, offsets[3])
    assert {c.clear_command.offset for c in commands(journal)[2:]} == {offsets[3]}


@pytest.mark.parametrize(("body", "status", "reason"), BAD_CLEARS)
def test_bad_clears_of_the_aggregated_queue_are_refused_as_a_subscriber_s_are(
    client: TestClient, journal: SqliteJournal, body: dict[str, Any], status: int, reason: str
) -> None:
    subscriber(journal, "e1").announce(-1)
    wait_queue(client, EDITABLE_QUEUE)
    response = client.post(f"/queues/{EDITABLE_QUEUE}/clear", json=body)
    assert response.status_code == status, response.text
    assert reason in str(response.json()["detail"])
    assert commands(journal) == []


def test_a_clear_up_to_an_offset_skips_the_subscribers_already_past_it(
    client: TestClient, journal: SqliteJournal
) -> None:
    offsets = distribute(client, 3)
    behind, ahead = subscriber(journal, "e1"), subscriber(journal, "e2")
    behind.announce(-1)
    ahead.announce(offsets[1])
    wait_queue(client, EDITABLE_QUEUE, size=3)
    answer = client.post(
        f"/queues/{EDITABLE_QUEUE}/clear", json={"mode": "upTo", "offset": offsets[0]}
    )
    assert answer.status_code == 200, answer.text
    assert (answer.json()["removed"], answer.json()["clearOffset"]) == (1, offsets[0])
    assert [(c.sub_sling_id, c.clear_command.offset) for c in commands(journal)] == [
        ("e1", offsets[0])
    ]


def test_error_queue_merges_the_members_and_unknown_names_are_404(
    client: TestClient, journal: SqliteJournal
) -> None:
    offsets = distribute(client, 3)
    a, b = subscriber(journal, "a"), subscriber(journal, "b", editable=False)
    a.announce(offsets[-1])
    b.announce(offsets[-1])
    a.failed(offsets[0])
    b.failed(offsets[1])
    a.log_error(offsets[0], "disk full")
    wait_queue(client, ALL_QUEUE, errorQueueSize=2)
    page = client.get(f"/queues/{ALL_QUEUE}/errors").json()
    assert page["total"] == 2
    assert [i["offset"] for i in page["items"]] == offsets[:2]
    assert page["items"][0]["lastError"]["message"] == "disk full"
    editable = client.get(f"/queues/{EDITABLE_QUEUE}/errors").json()
    assert [i["offset"] for i in editable["items"]] == [offsets[0]]
    assert client.get("/queues/nope").status_code == 404


def test_the_console_shows_a_members_error_at_the_aggregated_head(
    client: TestClient, journal: SqliteJournal
) -> None:
    offsets = distribute(client, 2)
    a, b = subscriber(journal, "a"), subscriber(journal, "b")
    a.announce(-1, retries=3)
    b.announce(offsets[0])
    a.log_error(offsets[0], "disk full")

    def head_errors() -> list[dict[str, object]]:
        errors: list[dict[str, object]] = client.get("/console/api/head-errors").json()
        return errors if len(errors) == 2 else []

    errors = wait_for(head_errors, what="a head error for each aggregated queue")
    assert {e["queue"] for e in errors} == {EDITABLE_QUEUE, ALL_QUEUE}
    assert {(e["offset"], e["attempts"], e["message"]) for e in errors} == {
        (offsets[0], 3, "disk full")
    }


def test_without_subscribers_there_is_no_queue(client: TestClient) -> None:
    assert queues(client) == {}
    assert client.get(f"/queues/{EDITABLE_QUEUE}").status_code == 404


def test_an_aggregated_queue_is_paused_when_a_member_is_and_cannot_be_paused_itself(
    client: TestClient, journal: SqliteJournal
) -> None:
    offsets = distribute(client, 2)
    subscriber(journal, "e1").announce(offsets[0], paused=True)
    subscriber(journal, "e2").announce(offsets[0])
    wait_queue(client, EDITABLE_QUEUE, size=1, state="PAUSED")
    response = client.post(f"/queues/{EDITABLE_QUEUE}/pause")
    assert response.status_code == 400
    assert "aggregated" in response.json()["detail"]
    assert commands(journal) == []
