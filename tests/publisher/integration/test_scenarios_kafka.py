"""Sling scenarios 1, 3, 4, 6 and 9 against the real Kafka broker and S3 server.

Subscribers are simulated by writing their discovery, status and log messages to the journal.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from journal.api import Journal, Position
from journal.errors import JournalError
from journal.kafka.journal import KafkaJournal
from journal.settings import JournalSettings
from journal.topics import topic_specs
from journal.wire.messages import CommandMessage, ReqType, decode
from publisher.agent import PublisherAgent
from publisher.api import create_app
from publisher.distributed_events import distributed_event
from tests.publisher.conftest import AUTH
from tests.publisher.integration.conftest import KafkaAgentFactory
from tests.publisher.notifiers import two_leaders_send_each_event_once
from tests.publisher.packages import put_packages
from tests.publisher.simulate import SimulatedSubscriber
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


def subscriber(
    agent: PublisherAgent, journal: Journal, sling_id: str, **kw: Any
) -> SimulatedSubscriber:
    return SimulatedSubscriber(
        journal, agent.topics, sling_id, pub_agent_name=agent.settings.agent_name, **kw
    )


def read_all(journal: Journal, topic: str) -> list[Any]:
    out = []
    with journal.consumer(topic, Position.earliest()) as consumer:
        while batch := consumer.poll(1.0):
            out.extend(batch)
    return out


def wait_queue(client: TestClient, name: str, **expected: Any) -> dict[str, Any]:
    def matches() -> dict[str, Any] | None:
        for queue in client.get("/queues").json():
            if queue["name"] == name and all(queue[k] == v for k, v in expected.items()):
                return dict(queue)
        return None

    found: dict[str, Any] = wait_for(matches, 30, f"queue {name} with {expected}")
    return found


def test_scenario_1_every_action_is_accepted_and_empty_paths_refused(
    kafka_client: TestClient, kafka_journal: KafkaJournal, kafka_agent: PublisherAgent
) -> None:
    offsets = []
    for action in ["ADD", "DELETE", "TEST", "INVALIDATE"]:
        body: dict[str, Any] = {"action": action, "paths": ["/content/a"]}
        if action == "ADD":
            body["nodes"] = [{"path": "/content/a", "properties": {"title": "A"}}]
        response = kafka_client.post("/distribute", json=body)
        assert response.status_code == 200, response.text
        offsets.append(response.json()["offset"])
    assert offsets == sorted(offsets)
    assert len(set(offsets)) == 4
    records = read_all(kafka_journal, kafka_agent.topics.package)
    assert [r.offset for r in records] == offsets
    types = [decode(r.headers, r.value).req_type for r in records]  # type: ignore[attr-defined]
    assert types == [ReqType.ADD, ReqType.DELETE, ReqType.TEST, ReqType.INVALIDATE]
    response = kafka_client.post("/distribute", json={"action": "ADD", "paths": []})
    assert response.status_code == 400


def test_scenario_3_old_subscriber_sees_exactly_the_2000_logged_packages(
    make_kafka_agent: KafkaAgentFactory,
    kafka_journal: KafkaJournal,
    kafka_settings: JournalSettings,
    unique_name: str,
) -> None:
    kafka_journal.create_topics(topic_specs(kafka_settings))
    logged = put_packages(kafka_journal, 2000, kafka_settings.topics.package, agent=unique_name)
    agent = make_kafka_agent()
    client = TestClient(create_app(agent))
    assert agent.cache.size == 0
    subscriber(agent, kafka_journal, "late").announce(logged[0] - 1)
    queue = wait_queue(client, "late-subscriber", size=2000)
    assert queue["headOffset"] == logged[0]
    page = client.get("/queues/late-subscriber", params={"skip": 1000, "limit": 1000}).json()
    assert [i["offset"] for i in page["items"]] == logged[1000:]
    assert agent.metrics.queue_cache_fetch_count._value.get() == 1


def test_scenario_4_two_subscribers_queues_appear_and_drain(
    kafka_client: TestClient, kafka_journal: KafkaJournal, kafka_agent: PublisherAgent
) -> None:
    offsets = [
        kafka_client.post("/distribute", json={"action": "DELETE", "paths": [f"/p{i}"]}).json()[
            "offset"
        ]
        for i in range(5)
    ]
    one = subscriber(kafka_agent, kafka_journal, "one")
    two = subscriber(kafka_agent, kafka_journal, "two")
    one.announce(offsets[0] - 1)
    two.announce(offsets[2])
    wait_queue(kafka_client, "one-subscriber", size=5, state="RUNNING")
    wait_queue(kafka_client, "two-subscriber", size=2, state="RUNNING")
    for step in offsets:
        one.announce(step)
        two.announce(max(step, offsets[2]))
    wait_queue(kafka_client, "one-subscriber", size=0, state="IDLE")
    wait_queue(kafka_client, "two-subscriber", size=0, state="IDLE")
    assert kafka_client.get("/agent").json()["state"] == "IDLE"


def test_scenario_6_clear_operations_send_clear_commands(
    kafka_client: TestClient, kafka_journal: KafkaJournal, kafka_agent: PublisherAgent
) -> None:
    offsets = [
        kafka_client.post("/distribute", json={"action": "DELETE", "paths": [f"/p{i}"]}).json()[
            "offset"
        ]
        for i in range(6)
    ]
    editable = subscriber(kafka_agent, kafka_journal, "ed", agent_name="sub-ed")
    fixed = subscriber(kafka_agent, kafka_journal, "ro", agent_name="sub-ro", editable=False)
    editable.announce(offsets[0] - 1)
    fixed.announce(offsets[0] - 1)
    wait_queue(kafka_client, "ed-sub-ed", size=6)
    wait_queue(kafka_client, "ro-sub-ro", size=6)
    sent = []
    for body in [
        {"mode": "first", "count": 1},
        {"mode": "head"},
        {"mode": "upTo", "offset": offsets[3]},
        {"mode": "all"},
    ]:
        response = kafka_client.post("/queues/ed-sub-ed/clear", json=body)
        assert response.status_code == 200, response.text
        sent.append(response.json()["clearOffset"])
    assert sent == [offsets[0], offsets[0], offsets[3], offsets[5]]
    refused = kafka_client.post("/queues/ro-sub-ro/clear", json={"mode": "all"})
    assert refused.status_code == 409
    records = read_all(kafka_journal, kafka_agent.topics.command)
    assert {r.key for r in records} == {b"sub-ed"}
    assert len({r.partition for r in records}) == 1  # keyed: one partition, in order
    commands: list[CommandMessage] = [decode(r.headers, r.value) for r in records]  # type: ignore[misc]
    assert [c.clear_command.offset for c in commands] == sent
    editable.announce(offsets[5])
    wait_queue(kafka_client, "ed-sub-ed", size=0, state="IDLE")


def test_scenario_9_min_offset_10_to_13_gives_exactly_3_events(
    kafka_client: TestClient, kafka_journal: KafkaJournal, kafka_agent: PublisherAgent
) -> None:
    offsets = [
        kafka_client.post("/distribute", json={"action": "DELETE", "paths": [f"/p{i}"]}).json()[
            "offset"
        ]
        for i in range(14)
    ]
    wait_for(lambda: kafka_agent.leadership.is_leader, 30, "leadership")
    sub = subscriber(kafka_agent, kafka_journal, "s")
    sub.announce(offsets[10])
    wait_for(lambda: kafka_agent.events.last_offset == offsets[10], 30, "event start point")
    sub.announce(offsets[13])
    wait_for(lambda: kafka_agent.events.last_offset == offsets[13], 30, "events sent")
    records = read_all(kafka_journal, kafka_agent.topics.event)
    events = [e for r in records if (e := distributed_event(r.headers, r.value)) is not None]
    assert [e["offset"] for e in events] == offsets[11:14]
    assert {e["pubAgentName"] for e in events} == {kafka_agent.settings.agent_name}
    assert events[0]["paths"] == ["/p11"]
    assert events[0]["application"] == "pub-1"
    client = TestClient(create_app(kafka_agent), headers=AUTH)
    assert "scd_distributed_events_total 3.0" in client.get("/metrics").text


def test_two_instances_both_sending_events_send_each_once(
    kafka_journal: KafkaJournal, kafka_settings: JournalSettings
) -> None:
    """Split brain on the real broker: each instance's transactional writer fences the other's,
    and what a fenced instance sends is aborted, never read."""
    kafka_journal.create_topics(topic_specs(kafka_settings))
    topics = kafka_settings.topics

    def led() -> bool:  # a topic just created has no partition leader for a moment
        try:
            return all(kafka_journal.latest_offset(t) >= 0 for t in (topics.package, topics.event))
        except JournalError:
            return False

    wait_for(led, 30, "partition leaders of the new topics")
    two_leaders_send_each_event_once(kafka_journal, topics.package, topics.event)
