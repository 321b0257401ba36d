"""Distributed events on the embedded journal (Sling scenario 9) and their resumption."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from journal.api import Journal, Position, TopicSpec
from journal.settings import TopicSettings
from journal.sqlite.journal import SqliteJournal
from publisher.agent import PublisherAgent
from publisher.api import create_app
from publisher.discovery import DiscoveryView
from publisher.distributed_events import distributed_event
from tests.contract.journal_contract import read_all
from tests.publisher.conftest import AUTH, AgentFactory
from tests.publisher.notifiers import (
    announce,
    notifier,
    read_cache_to_end,
    two_leaders_send_each_event_once,
)
from tests.publisher.packages import PACKAGE_TOPIC, put_packages
from tests.publisher.simulate import SimulatedSubscriber
from tests.waiting import wait_for

TOPICS = TopicSettings()


def events(journal: Journal) -> list[dict[str, Any]]:
    records = read_all(journal, TOPICS.event, Position.earliest(), 0)
    found = [e for r in records if (e := distributed_event(r.headers, r.value)) is not None]
    return sorted(found, key=lambda e: e["offset"])


def distribute(agent: PublisherAgent, count: int) -> list[int]:
    client = TestClient(create_app(agent), headers=AUTH)
    out = []
    for i in range(count):
        response = client.post("/distribute", json={"action": "DELETE", "deepPaths": [f"/p{i}"]})
        out.append(response.json()["offset"])
    return out


def start_events(agent: PublisherAgent, sub: SimulatedSubscriber, offset: int) -> None:
    """Announce ``offset`` and wait until the leader's events start after it."""
    sub.announce(offset)
    wait_for(lambda: agent.events.last_offset == offset, what=f"events to start after {offset}")


def wait_events(journal: Journal, count: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = wait_for(
        lambda: (e := events(journal)) and len(e) >= count and e, what=f"{count} events"
    )
    return found


def test_minimum_offset_rising_from_10_to_13_gives_exactly_3_events(
    make_agent: AgentFactory, journal: SqliteJournal
) -> None:
    agent = make_agent()
    offsets = distribute(agent, 14)
    sub = SimulatedSubscriber(journal, TOPICS, "s1")
    start_events(agent, sub, offsets[10])
    sub.announce(offsets[13])
    found = wait_events(journal, 3)
    assert [e["offset"] for e in found] == offsets[11:14]
    first = found[0]
    assert first["pubAgentName"] == "publish"
    assert first["application"] == "pub-1"
    assert first["paths"] == ["/p11"]
    assert first["deepPaths"] == ["/p11"]
    assert first["packageId"]
    wait_for(lambda: agent.events.last_offset == offsets[13])
    assert len(events(journal)) == 3


def test_events_wait_for_the_slowest_alive_subscriber(
    make_agent: AgentFactory, journal: SqliteJournal
) -> None:
    agent = make_agent()
    offsets = distribute(agent, 6)
    fast = SimulatedSubscriber(journal, TOPICS, "fast")
    slow = SimulatedSubscriber(journal, TOPICS, "slow")
    fast.announce(offsets[0])
    slow.announce(offsets[0])
    wait_for(lambda: agent.events.last_offset == offsets[0])
    fast.announce(offsets[5])
    slow.announce(offsets[2])
    assert [e["offset"] for e in wait_events(journal, 2)] == offsets[1:3]
    slow.announce(offsets[5])
    assert [e["offset"] for e in wait_events(journal, 5)] == offsets[1:6]


def test_a_new_leader_resumes_after_the_last_event_written(
    make_agent: AgentFactory, journal: SqliteJournal
) -> None:
    first = make_agent()
    offsets = distribute(first, 8)
    sub = SimulatedSubscriber(journal, TOPICS, "s")
    start_events(first, sub, offsets[0])
    sub.announce(offsets[3])
    wait_events(journal, 3)
    first.stop()

    second = make_agent(instance_id="pub-2")
    wait_for(lambda: second.leadership.is_leader, what="second leader")
    sub.announce(offsets[7])
    found = wait_events(journal, 7)
    assert [e["offset"] for e in found] == offsets[1:8]
    assert {e["application"] for e in found[3:]} == {"pub-2"}


def test_only_the_leader_sends_events(make_agent: AgentFactory, journal: SqliteJournal) -> None:
    one = make_agent(instance_id="pub-1")
    wait_for(lambda: one.leadership.is_leader)
    two = make_agent(instance_id="pub-2")
    offsets = distribute(one, 4)
    sub = SimulatedSubscriber(journal, TOPICS, "s")
    start_events(one, sub, offsets[0])
    sub.announce(offsets[3])
    found = wait_events(journal, 3)
    assert {e["application"] for e in found} == {"pub-1"}
    assert not two.leadership.is_leader
    assert two.events.last_offset is None
    assert two.run_events_once() == 0

    one.stop()
    wait_for(lambda: two.leadership.is_leader, what="takeover")
    more = distribute(two, 2)
    sub.announce(more[-1])
    found = wait_events(journal, 5)
    assert [e["offset"] for e in found] == offsets[1:] + more


def test_a_leader_taking_over_before_the_first_event_starts_where_the_first_did(
    make_agent: AgentFactory, journal: SqliteJournal
) -> None:
    first = make_agent()
    offsets = distribute(first, 6)
    sub = SimulatedSubscriber(journal, TOPICS, "s")
    start_events(first, sub, offsets[0])
    first.stop()  # before any event was sent
    sub.announce(offsets[5])  # the subscribers move on meanwhile

    second = make_agent(instance_id="pub-2")
    wait_for(lambda: second.leadership.is_leader, what="second leader")
    found = wait_events(journal, 5)
    assert [e["offset"] for e in found] == offsets[1:6]
    assert {e["application"] for e in found} == {"pub-2"}


def test_events_wait_for_the_cache_when_a_subscriber_is_ahead_of_it(journal: SqliteJournal) -> None:
    """A subscriber reads the package topic itself and can announce an offset this instance's
    cache has not read yet: those packages get their events once the cache has them."""
    journal.create_topics([TopicSpec(PACKAGE_TOPIC), TopicSpec(TOPICS.event)])
    view = DiscoveryView(ttl_s=30)
    events_of = notifier(journal, PACKAGE_TOPIC, TOPICS.event, view, "pub-1")
    offsets = put_packages(journal, 5)

    announce(view, offsets[0])
    assert events_of.tick() == 0
    assert events_of.last_offset == offsets[0]
    announce(view, offsets[4])
    assert events_of.tick() == 0  # the cache has read nothing yet
    assert events_of.last_offset == offsets[0]
    read_cache_to_end(events_of)
    assert events_of.tick() == 4
    assert [e["offset"] for e in events(journal)] == offsets[1:]


def test_two_instances_both_sending_events_send_each_once(journal: SqliteJournal) -> None:
    journal.create_topics([TopicSpec(PACKAGE_TOPIC), TopicSpec(TOPICS.event)])
    two_leaders_send_each_event_once(journal, PACKAGE_TOPIC, TOPICS.event)
