"""A staged subscriber's queue on the publisher: WAITING_FOR_CANARY and CANARY_FAILED as it
announces them (subscriber/bookkeeper/staging.py), behind BLOCKED and PAUSED, in an aggregated
queue too; announcements naming hostile canary lists are bad records."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from journal.api import Record
from journal.sqlite.journal import SqliteJournal
from journal.wire.messages import DiscoveryMessage, SubscriberConfiguration
from publisher.discovery import MAX_CANARIES, DiscoveryView
from publisher.errors import BadRecord
from tests.publisher.unit.test_queues_api import distribute, subscriber, wait_queue


def test_a_staged_subscribers_queue_shows_its_wait_and_its_hold(
    client: TestClient, journal: SqliteJournal
) -> None:
    distribute(client, 2)
    s = subscriber(journal, "st", agent_name="staged")
    s.announce(-1, canary_pending=["canary"])
    wait_queue(client, "st-staged", size=2, state="WAITING_FOR_CANARY")
    s.announce(-1, canary_failed=["canary"])
    wait_queue(client, "st-staged", size=2, state="CANARY_FAILED")
    s.announce(-1, paused=True, canary_failed=["canary"])
    wait_queue(client, "st-staged", state="PAUSED")  # paused goes first
    s.announce(-1)
    wait_queue(client, "st-staged", size=2, state="RUNNING")


@pytest.mark.parametrize(
    ("pending", "failed", "reason"),
    [
        (["x" * 300], [], "longer than 255"),
        ([], ["a\nb"], "control characters"),
        ([""], [], "empty"),
        ([f"c{i}" for i in range(MAX_CANARIES)], ["one-more"], "canaries"),
    ],
)
def test_hostile_canary_lists_are_bad_records(
    pending: list[str], failed: list[str], reason: str
) -> None:
    message = DiscoveryMessage(
        sub_sling_id="s", sub_agent_name="sub",
        subscriber_configuration=SubscriberConfiguration(editable=True, max_retries=1),
        canary_pending=pending, canary_failed=failed,
    )  # fmt: skip
    view = DiscoveryView(ttl_s=30)
    with pytest.raises(BadRecord, match=reason):
        view.handle(message, Record("d", 0, 0, view.clock_ms(), b"s", {}, b""))
    assert len(view) == 0
