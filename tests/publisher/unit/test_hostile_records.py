"""Hostile records in every publisher reader (queue cache, discovery, error queues, events):
skipped, counted in scd_publisher_bad_records_total{topic}, logged at most once per interval,
and the reader goes on with the next record."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from journal.api import Record, TopicSpec
from journal.messaging import MessageSender
from journal.settings import TopicSettings
from journal.sqlite.journal import SqliteJournal
from journal.wire.messages import (
    DiscoveryMessage,
    LogMessage,
    PackageStatusMessage,
    ReqType,
    Status,
    SubscriberConfiguration,
    SubscriberState,
)
from publisher.agent import PublisherAgent
from publisher.discovery import DiscoveryView
from publisher.distributed_events import EVENT_TYPE, _event_offset
from publisher.errors import BadRecord
from publisher.metrics import PublisherMetrics
from publisher.queues.cache import QueueCache
from publisher.queues.entries import EntrySegment
from publisher.queues.error_queues import ErrorQueues
from tests.publisher.notifiers import AGENT, notifier
from tests.publisher.packages import PACKAGE_TOPIC, package_message, put_packages
from tests.publisher.simulate import SimulatedSubscriber
from tests.waiting import wait_for

TOPICS = TopicSettings()
MEGABYTE_NAME = "x" * 1_000_000
# Control topics refuse records over 64 KiB before sending: forged names as long as they allow.
LONG_NAME = "y" * 60_000


def bad_count(registry: CollectorRegistry, topic: str) -> float:
    value = registry.get_sample_value("scd_publisher_bad_records_total", {"topic": topic})
    return value or 0.0


def record(topic: str = "t", offset: int = 0) -> Record:
    return Record(topic, 0, offset, 1_700_000_000_000, None, {}, b"")


# ---------------------------------------------------------------- queue cache


def test_queue_cache_skips_out_of_range_packages_and_keeps_reading(
    journal: SqliteJournal, caplog: pytest.LogCaptureFixture
) -> None:
    journal.create_topics([TopicSpec(PACKAGE_TOPIC)])
    metrics = PublisherMetrics()
    cache = QueueCache(journal, PACKAGE_TOPIC, "publish", fetch_timeout_s=10, metrics=metrics)
    cache.open()
    hostile = [
        package_message(req_type=200),  # OverflowError in the entry arrays before
        package_message(req_type=-1),
        package_message(paths=["/" + "p" * 5000]),
        package_message(paths=[""]),
        package_message(size=-5),
        package_message(created_ms=-1),
    ]
    huge_id = package_message()
    huge_id.pkg_id = "i" * 500_000
    sender = MessageSender(journal, PACKAGE_TOPIC)
    good = put_packages(journal, 1)
    for message in [*hostile, huge_id]:
        sender.send(message)
    good += put_packages(journal, 2)
    caplog.set_level(logging.WARNING, "publisher.queues.cache")
    cache.start()  # the real tail thread
    try:
        wait_for(lambda: cache.next_offset == journal.latest_offset(PACKAGE_TOPIC))
        assert [e.offset for e in cache.items_after(-1)] == good
        assert {e.action.value for e in cache.items_after(-1)} == {"ADD"}
        assert bad_count(metrics.registry, PACKAGE_TOPIC) == 7
        assert cache.thread is not None
        assert cache.thread.is_alive()
        # One line for the first bad record, the other six are only counted.
        assert len([r for r in caplog.records if "bad record" in r.getMessage()]) == 1
        more = put_packages(journal, 1)
        wait_for(lambda: [e.offset for e in cache.items_after(good[-1])] == more)
    finally:
        cache.stop()


def test_a_refused_entry_leaves_the_segment_consistent() -> None:
    segment = EntrySegment()
    with pytest.raises(OverflowError):
        segment.append(1, "id", 200, ["/a"], [], 10, 5)
    segment.append(2, "id2", int(ReqType.DELETE), ["/b"], [], 10, 5)
    assert len(segment) == 1
    assert segment.entry(0).paths == ("/b",)


# ---------------------------------------------------------------- discovery and status


def discovery(sling_id: str = "s", agent: str = "sub", **state: Any) -> DiscoveryMessage:
    message = DiscoveryMessage(
        sub_sling_id=sling_id,
        sub_agent_name=agent,
        subscriber_configuration=SubscriberConfiguration(editable=True, max_retries=1),
    )
    if state:
        message.subscriber_state.append(SubscriberState(**state))
    return message


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (discovery(agent=MEGABYTE_NAME), "longer than 255"),
        (discovery(sling_id=""), "empty"),
        (discovery(sling_id="a\nb"), "control characters"),
        (discovery(pub_agent_name="publish", offset=-5), "out of range"),
        (discovery(pub_agent_name="publish", offset=1, retries=-1), "negative"),
        (discovery(pub_agent_name=MEGABYTE_NAME, offset=1), "longer than 255"),
    ],
)
def test_discovery_refuses_out_of_range_fields(message: DiscoveryMessage, reason: str) -> None:
    view = DiscoveryView(ttl_s=30)
    with pytest.raises(BadRecord, match=reason):
        view.handle(message, record())
    assert len(view) == 0


def test_discovery_refuses_too_many_states() -> None:
    message = discovery()
    for i in range(100):
        message.subscriber_state.append(SubscriberState(pub_agent_name=f"a{i}", offset=1))
    with pytest.raises(BadRecord, match="100 subscriber states"):
        DiscoveryView(ttl_s=30).handle(message, record())


def status(offset: int = 3, state: int = Status.REMOVED_FAILED, **names: str) -> Any:
    fields = {"sub_sling_id": "s", "sub_agent_name": "sub", "pub_agent_name": "publish"}
    return PackageStatusMessage(offset=offset, status=state, **{**fields, **names})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (status(state=99), "status 99"),
        (status(offset=-1), "out of range"),
        (status(sub_agent_name=MEGABYTE_NAME), "longer than 255"),
    ],
)
def test_error_queues_refuse_out_of_range_statuses(
    message: PackageStatusMessage, reason: str
) -> None:
    errors = ErrorQueues("publish")
    with pytest.raises(BadRecord, match=reason):
        errors.handle_status(message, record())
    assert errors.tracked() == 0


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"offset": -2}, "out of range"),
        ({"sub_sling_id": MEGABYTE_NAME}, "longer than 255"),
        ({"pkg_id": MEGABYTE_NAME}, "longer than 255"),
    ],
)
def test_error_queues_refuse_out_of_range_log_messages(fields: dict[str, Any], reason: str) -> None:
    errors = ErrorQueues("publish")
    base = {"sub_sling_id": "s", "sub_agent_name": "sub", "offset": 1, "message": "m"}
    with pytest.raises(BadRecord, match=reason):
        errors.handle_log(LogMessage(**{**base, **fields}), record())
    assert errors.tracked() == 0


def test_agent_readers_skip_hostile_records_and_go_on(
    agent: PublisherAgent, journal: SqliteJournal
) -> None:
    """Through the real pollers: hostile discovery and status records, then good ones."""
    discovery_sender = MessageSender(journal, TOPICS.discovery)
    status_sender = MessageSender(journal, TOPICS.status)
    for message in [
        discovery(agent=LONG_NAME),
        discovery(sling_id="bad", pub_agent_name="publish", offset=-7),
    ]:
        discovery_sender.send(message)
    for hostile in [status(state=99), status(offset=-1), status(sub_sling_id=LONG_NAME)]:
        status_sender.send(hostile)
    status_sender.send(LogMessage(sub_sling_id="s", sub_agent_name="sub", offset=-4))
    good = SimulatedSubscriber(journal, TOPICS, "s", agent_name="sub", max_retries=1)
    good.failed(5)
    good.announce(-1)
    wait_for(lambda: agent.errors.size("s-sub") == 1 and agent.discovery.get("s-sub"))
    registry = agent.metrics.registry
    wait_for(lambda: bad_count(registry, TOPICS.discovery) == 2, what="2 bad discovery records")
    wait_for(lambda: bad_count(registry, TOPICS.status) == 4, what="4 bad status records")
    assert [s.queue_name for s in agent.discovery.alive()] == ["s-sub"]
    assert all(p.thread is not None and p.thread.is_alive() for p in agent._pollers)


# ---------------------------------------------------------------- events read-back


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"[" * 100_000, "not JSON"),  # RecursionError in the parser
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "not an event object"),
        (b'{"pubAgentName": "publish", "offset": "5"}', "not an integer"),
        (b'{"pubAgentName": "publish", "offset": 1e999}', "not an integer"),
        (b'{"pubAgentName": "publish", "offset": true}', "not an integer"),
        (b'{"pubAgentName": "publish"}', "not an integer"),
        (b'{"pubAgentName": "publish", "offset": -3}', "out of range"),
        (b'{"pubAgentName": "publish", "startAfter": -2}', "out of range"),
        (b'{"pubAgentName": "publish", "offset": 1000000000000}', "beyond the package log"),
    ],
)
def test_event_read_back_refuses_what_no_publisher_wrote(value: bytes, reason: str) -> None:
    with pytest.raises(BadRecord, match=reason):
        _event_offset(value, "publish", log_end=100)


def test_event_read_back_takes_the_last_valid_event(journal: SqliteJournal) -> None:
    journal.create_topics([TopicSpec(PACKAGE_TOPIC), TopicSpec(TOPICS.event, partitions=1)])
    offsets = put_packages(journal, 5)
    events = notifier(journal, PACKAGE_TOPIC, TOPICS.event, DiscoveryView(ttl_s=30), "pub-1")
    headers = {"type": EVENT_TYPE}
    valid = {"pubAgentName": AGENT, "offset": offsets[2]}
    journal.send(TOPICS.event, json.dumps(valid).encode(), key=b"publish", headers=headers)
    for forged in [{"pubAgentName": AGENT, "offset": 10**12}, {"pubAgentName": AGENT}]:
        journal.send(TOPICS.event, json.dumps(forged).encode(), key=b"publish", headers=headers)
    journal.send(TOPICS.event, b"[" * 50_000, key=b"publish", headers=headers)
    other = {"pubAgentName": "another-agent", "offset": 10**12}  # not ours: not even looked at
    journal.send(TOPICS.event, json.dumps(other).encode(), key=b"x", headers=headers)
    assert events.read_back() == offsets[2]
    assert bad_count(events.metrics.registry, TOPICS.event) == 3
