"""Everything from outside costs bounded memory on the publisher: 50,000 forged subscriber
announcements leave a capped discovery view, a small /queues answer, bounded metric series and
bounded error queues; drops are counted and logged a line at a time."""

from __future__ import annotations

import logging
import uuid

import pytest
from fastapi.testclient import TestClient

from journal.api import Record
from journal.wire.messages import (
    DiscoveryMessage,
    LogMessage,
    PackageStatusMessage,
    Status,
    SubscriberConfiguration,
    SubscriberState,
)
from publisher.agent import PublisherAgent
from publisher.api import create_app
from publisher.discovery import DiscoveryView
from publisher.metrics import PublisherMetrics
from publisher.queues import error_queues
from publisher.queues.error_queues import ErrorQueues
from runtime.clock import now_ms
from runtime.ratelog import RateLimitedLog
from tests.publisher.conftest import AUTH, AgentFactory

FORGED = 50_000
MAX_SUBSCRIBERS = 1000
ONE_MB = 1_000_000


def announcement(sling_id: str) -> DiscoveryMessage:
    message = DiscoveryMessage(
        sub_sling_id=sling_id,
        sub_agent_name="subscriber",
        subscriber_configuration=SubscriberConfiguration(editable=True, max_retries=-1),
    )
    message.subscriber_state.append(SubscriberState(pub_agent_name="publish", offset=-1))
    return message


def announce_forged(view: DiscoveryView, count: int) -> list[str]:
    """``count`` announcements with random instance ids, as the discovery poller hands them."""
    names = []
    for offset in range(count):
        sling_id = str(uuid.uuid4())
        view.handle(announcement(sling_id), Record("d", 0, offset, now_ms(), None, {}, b""))
        names.append(f"{sling_id}-subscriber")
    return names


def test_the_view_keeps_the_most_recently_announced(caplog: pytest.LogCaptureFixture) -> None:
    metrics = PublisherMetrics()
    view = DiscoveryView(ttl_s=30, max_subscribers=MAX_SUBSCRIBERS, metrics=metrics)
    caplog.set_level(logging.WARNING, "publisher.discovery")
    view._drop_log.clock = lambda: 0.0  # the flood within one interval, however slow the host
    names = announce_forged(view, FORGED)
    assert len(view) == MAX_SUBSCRIBERS
    assert view.dropped == FORGED - MAX_SUBSCRIBERS
    assert {s.queue_name for s in view.alive()} == set(names[-MAX_SUBSCRIBERS:])
    dropped = metrics.registry.get_sample_value("scd_discovery_dropped_total")
    assert dropped == FORGED - MAX_SUBSCRIBERS
    # 49,000 drops within the 10 s interval: one log line.
    assert len([r for r in caplog.records if "discovery view full" in r.getMessage()]) == 1
    # A real subscriber dropped by the flood is back with its next announcement.
    view.handle(announcement("real"), Record("d", 0, 0, now_ms(), None, {}, b""))
    assert view.get("real-subscriber") is not None
    assert len(view) == MAX_SUBSCRIBERS


def test_queues_answer_and_metric_series_stay_small(make_agent: AgentFactory) -> None:
    agent: PublisherAgent = make_agent(max_subscribers=MAX_SUBSCRIBERS)
    client = TestClient(create_app(agent), headers=AUTH)
    first = announce_forged(agent.discovery, FORGED)
    response = client.get("/queues")
    assert response.headers["x-total-count"] == str(MAX_SUBSCRIBERS)
    assert len(response.json()) == 100
    assert len(response.content) < ONE_MB
    largest = client.get("/queues", params={"limit": 1000})
    assert len(largest.json()) == MAX_SUBSCRIBERS
    assert len(largest.content) < ONE_MB
    assert len(client.get("/subscribers", params={"limit": 1000}).content) < ONE_MB

    text = client.get("/metrics").text
    assert text.count("scd_queue_size{") == MAX_SUBSCRIBERS
    assert text.count("scd_error_queue_size{") == MAX_SUBSCRIBERS
    # The next flood drops every one of them: their series go too.
    second = announce_forged(agent.discovery, MAX_SUBSCRIBERS)
    text = client.get("/metrics").text
    assert text.count("scd_queue_size{") == MAX_SUBSCRIBERS
    assert f'queue="{second[0]}"' in text
    assert f'queue="{first[-1]}"' not in text


def failed(errors: ErrorQueues, sling_id: str, offset: int) -> None:
    message = PackageStatusMessage(
        sub_sling_id=sling_id,
        sub_agent_name="sub",
        pub_agent_name="publish",
        offset=offset,
        status=Status.REMOVED_FAILED,
    )
    errors.handle_status(message, Record("s", 0, 0, 0, None, {}, b""))


def logged(errors: ErrorQueues, sling_id: str, offset: int, text: str) -> None:
    message = LogMessage(
        sub_sling_id=sling_id, sub_agent_name="sub", offset=offset, message=text, stacktrace=text
    )
    errors.handle_log(message, Record("s", 0, 0, 0, None, {}, b""))


def test_error_queues_track_a_bounded_number_of_subscribers() -> None:
    metrics = PublisherMetrics()
    errors = ErrorQueues("publish", max_subscribers=100, metrics=metrics)
    for i in range(5000):
        failed(errors, f"s{i}", 7)
        logged(errors, f"s{i}", 7, "disk full")
    assert errors.tracked() == 100
    assert errors.size("s4999-sub") == 1
    assert errors.size("s0-sub") == 0
    assert errors.last_error("s4999-sub", 7) is not None
    assert len(errors._ages) == 100  # the dropped subscribers' errors went with them
    sample = metrics.registry.get_sample_value
    assert sample("scd_error_queues_dropped_total", {"kind": "subscriber"}) == 4900


def test_failed_offsets_and_error_texts_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(error_queues, "MAX_FAILED_PER_SUBSCRIBER", 50)
    monkeypatch.setattr(error_queues, "MAX_ERROR_TEXT_CHARS", 100_000)
    errors = ErrorQueues("publish")
    for offset in range(60):
        failed(errors, "s", offset)
    assert errors.size("s-sub") == 50
    assert errors.offsets("s-sub", 0, 1) == [10]
    for offset in range(100):  # 8000 characters kept each (message and stack trace)
        logged(errors, f"s{offset % 3}", offset, "e" * 10_000)
    assert errors._error_chars <= 100_000
    assert errors.last_error("s0-sub", 99) is not None
    assert errors.last_error("s0-sub", 0) is None  # the oldest went first


def test_rate_limited_log_says_how_many_it_left_out(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    limited = RateLimitedLog(logging.getLogger("test.ratelog"), 10.0, clock=lambda: now[0])
    caplog.set_level(logging.INFO, "test.ratelog")
    logged_count = sum(limited.log(logging.INFO, "event %d", i) for i in range(100))
    now[0] = 10.0
    assert limited.log(logging.INFO, "event %d", 100)
    assert logged_count == 1
    assert [r.getMessage() for r in caplog.records] == [
        "event 0",
        "event 100 (and 99 more like it in the last 10 s, not logged)",
    ]
