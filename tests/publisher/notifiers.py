"""Distributed-event notifiers driven tick by tick, with a discovery view the test feeds."""

from __future__ import annotations

import pytest

from journal.api import Journal, Position, Record
from journal.errors import Fenced
from journal.wire.messages import DiscoveryMessage, SubscriberConfiguration, SubscriberState
from publisher.discovery import DiscoveryView
from publisher.distributed_events import DistributedEvents, distributed_event
from publisher.metrics import PublisherMetrics
from publisher.queues.cache import QueueCache
from tests.contract.journal_contract import read_all
from tests.publisher.packages import put_packages

AGENT = "publish"


def announce(view: DiscoveryView, offset: int) -> None:
    """One alive subscriber that has processed ``offset``."""
    message = DiscoveryMessage(
        sub_sling_id="s", sub_agent_name="sub", subscriber_configuration=SubscriberConfiguration()
    )
    message.subscriber_state.append(SubscriberState(pub_agent_name=AGENT, offset=offset))
    view.handle(message, Record("d", 0, 0, view.clock_ms(), b"s", {}, b""))


def notifier(
    journal: Journal, package_topic: str, event_topic: str, view: DiscoveryView, instance: str
) -> DistributedEvents:
    """A notifier of agent ``AGENT`` with its own queue cache, opened at offset 0."""
    cache = QueueCache(
        journal, package_topic, AGENT, fetch_timeout_s=10, metrics=PublisherMetrics()
    )
    cache.open(0)
    return DistributedEvents(
        journal,
        event_topic,
        cache,
        view,
        agent_name=AGENT,
        instance_id=instance,
        metrics=PublisherMetrics(),
    )


def read_cache_to_end(events: DistributedEvents) -> None:
    while events.cache.poll_tail(0.05):
        pass


def event_offsets(journal: Journal, event_topic: str, expected: int) -> list[int]:
    """Package offsets of the events on ``event_topic``, in log order (read until ``expected``
    arrived and on to the topic's end, for any extra)."""
    records = read_all(journal, event_topic, Position.earliest(), expected)
    found = [e for r in records if (e := distributed_event(r.headers, r.value))]
    return [e["offset"] for e in found]


def two_leaders_send_each_event_once(
    journal: Journal, package_topic: str, event_topic: str
) -> None:
    """Two instances that both believe they lead (split brain) take turns sending events: each
    one that opens its writer fences the other, whose next write fails and writes nothing. The
    event topic ends with each package's event once, in order."""
    view = DiscoveryView(ttl_s=30)
    a = notifier(journal, package_topic, event_topic, view, "pub-a")
    b = notifier(journal, package_topic, event_topic, view, "pub-b")
    offsets = put_packages(journal, 6, topic=package_topic)
    read_cache_to_end(a)
    read_cache_to_end(b)

    announce(view, offsets[0])
    assert a.tick() == 0
    assert a.last_offset == offsets[0]
    announce(view, offsets[2])
    assert a.tick() == 2
    assert b.tick() == 0
    assert b.last_offset == offsets[2]
    announce(view, offsets[4])
    with pytest.raises(Fenced):
        a.tick()  # b opened its writer since
    assert b.tick() == 2
    assert a.tick() == 0
    assert a.last_offset == offsets[4]
    announce(view, offsets[5])
    with pytest.raises(Fenced):
        b.tick()
    assert a.tick() == 1
    assert event_offsets(journal, event_topic, 5) == offsets[1:]
    assert a.metrics.events_fenced._value.get() == 1
    assert b.metrics.events_fenced._value.get() == 1
