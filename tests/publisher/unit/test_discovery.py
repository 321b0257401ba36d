from __future__ import annotations

import logging

import pytest

from journal.api import Record
from journal.wire.messages import DiscoveryMessage, SubscriberConfiguration, SubscriberState
from publisher.discovery import FORGET_AFTER_TTLS, DiscoveryView


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000_000

    def __call__(self) -> int:
        return self.now


def announce(
    view: DiscoveryView, sling_id: str, stamped_ms: int, offset: int = 5, retries: int = 0
) -> None:
    message = DiscoveryMessage(
        sub_sling_id=sling_id,
        sub_agent_name="sub",
        subscriber_configuration=SubscriberConfiguration(editable=True, max_retries=2),
    )
    message.subscriber_state.append(
        SubscriberState(pub_agent_name="publish", offset=offset, retries=retries)
    )
    view.handle(message, Record("d", 0, 0, stamped_ms, b"sub", {}, b""))


def test_alive_within_the_ttl_with_processed_offsets() -> None:
    clock = Clock()
    view = DiscoveryView(ttl_s=30, clock_ms=clock)
    announce(view, "s1", clock.now, offset=7, retries=1)
    (sub,) = view.alive()
    assert sub.queue_name == "s1-sub"
    assert sub.editable
    assert sub.max_retries == 2
    assert sub.states["publish"].offset == 7
    assert sub.states["publish"].retries == 1
    clock.now += 29_000
    assert view.get("s1-sub") is not None
    clock.now += 2_000
    assert view.alive() == []
    assert view.get("s1-sub") is None


def test_old_announcements_read_at_start_count_from_their_timestamp() -> None:
    clock = Clock()
    view = DiscoveryView(ttl_s=30, clock_ms=clock)
    announce(view, "gone", clock.now - 3_600_000)
    announce(view, "recent", clock.now - 10_000)
    assert [s.sling_id for s in view.alive()] == ["recent"]


def test_subscriber_clock_skew_within_the_ttl_is_ignored() -> None:
    clock = Clock()
    view = DiscoveryView(ttl_s=30, clock_ms=clock)
    announce(view, "ahead", clock.now + 20_000)
    clock.now += 25_000
    assert [s.sling_id for s in view.alive()] == ["ahead"]


def test_an_older_record_never_replaces_a_newer_one() -> None:
    clock = Clock()
    view = DiscoveryView(ttl_s=30, clock_ms=clock)
    announce(view, "s", clock.now, offset=9)
    announce(view, "s", clock.now - 3_600_000, offset=1)
    assert view.alive()[0].states["publish"].offset == 9


def test_appearing_and_disappearing_subscribers_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    view = DiscoveryView(ttl_s=30, clock_ms=clock)
    caplog.set_level(logging.INFO, "publisher.discovery")
    announce(view, "s1", clock.now)
    assert view.refresh() == ({"s1-sub"}, set())
    assert "subscriber s1-sub appeared" in caplog.text
    clock.now += 31_000
    assert view.refresh() == (set(), {"s1-sub"})
    assert "subscriber s1-sub disappeared" in caplog.text
    clock.now += FORGET_AFTER_TTLS * 30_000
    view.refresh()
    assert view._subscribers == {}
