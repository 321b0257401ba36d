"""Lag beyond retention on real Kafka (the tests of tests/subscriber/unit/test_behind_log.py
again: Kafka deletes closed segments only, so a record sent after the retention rolls the old
one), and on a Delta store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from blobstore.factory import open_blob_store
from journal.factory import open_journal
from subscriber.store.delta import DeltaStore
from subscriber.store.memory import MemoryStore
from tests.services import KafkaService
from tests.subscriber import harness as h
from tests.subscriber.harness import Env
from tests.subscriber.unit.test_behind_log import (
    expire_through,
    good,
    short_retention_env,
    test_a_gap_opening_while_it_runs_stops_it_even_with_accept_gap_set,
    test_a_subscriber_restarted_behind_the_log_stops_until_the_gap_is_accepted,
    test_it_resumes_by_itself_once_the_log_has_its_offset_again,
    test_packages_a_leader_wrote_follow_each_other_past_their_markers,
)

__all__ = [
    "test_a_gap_opening_while_it_runs_stops_it_even_with_accept_gap_set",
    "test_a_subscriber_restarted_behind_the_log_stops_until_the_gap_is_accepted",
    "test_it_resumes_by_itself_once_the_log_has_its_offset_again",
    "test_packages_a_leader_wrote_follow_each_other_past_their_markers",
]

pytestmark = pytest.mark.integration


@pytest.fixture
def short_env(kafka_service: KafkaService, unique_name: str, tmp_path: Path) -> Iterator[Env]:
    with short_retention_env(kafka_service, unique_name, tmp_path) as env:
        yield env


def test_markers_cost_one_look_at_the_log_s_start_per_fetch_not_one_per_package(
    short_env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Behind every transaction of a leader there is a marker, so a hole: the import loop asks
    the log's earliest offset once per fetch (a broker round trip on Kafka), not once per hole,
    or a subscriber on a slow link imports one package per round trip and falls behind (the
    embedded journal leaves no markers: Kafka only)."""
    env = short_env
    sent = [env.send(good(f"marked-{i}"), fenced=True) for i in range(40)]
    assert sent[-1] - sent[0] > len(sent) - 1, "the fenced writer left no markers"
    asked: list[str] = []
    earliest = env.journal.earliest_offset

    def counted(topic: str, partition: int = 0) -> int:
        asked.append(topic)
        return earliest(topic, partition)

    monkeypatch.setattr(env.journal, "earliest_offset", counted)
    agent = env.memory_agent(MemoryStore())
    h.drive(agent, lambda: agent.processed_offset == sent[-1] or agent.state == "BEHIND_LOG")
    assert agent.processed_offset == sent[-1], agent.ready()
    package_topic = env.js.topics.package
    # The start's look and one per fetch (a few): far fewer than one per package (40).
    assert 1 <= asked.count(package_topic) <= len(sent) // 4, asked


def test_a_delta_store_records_the_accepted_gap_in_its_history(
    tmp_path: Path, unique_name: str, spark: Any
) -> None:
    js = h.journal_settings(None, unique_name, tmp_path)
    js = js.model_copy(
        update={"topics": js.topics.model_copy(update={"package_retention_ms": 1000})}
    )
    bs = h.blob_settings(None, unique_name, tmp_path)
    with open_journal(js) as journal, open_blob_store(bs) as blobs:
        h.create_topics(journal, js)
        env = Env(journal, js, blobs, bs, tmp_path)
        first = env.agent(spark)
        seen = env.send(good("seen"))
        h.drive(first, lambda: first.processed_offset == seen)
        first.stop()
        lost = env.send(good("lost"))
        expire_through(env, lost)
        after = env.send(good("after"))

        behind = env.agent(spark)
        assert behind.state == "BEHIND_LOG"
        behind.stop()
        resumed = env.agent(spark, accept_gap=True)
        h.drive(resumed, lambda: resumed.processed_offset == after)
        resumed.stop()
        store = resumed.store
        assert isinstance(store, DeltaStore)
        assert {"/seen", "/after"} <= h.stored_paths(store)
        assert "/lost" not in h.stored_paths(store)
        reasons = [c["metadata"].get("reason", "") for c in store.history() if c["metadata"]]
        (accepted,) = [r for r in reasons if r.startswith("gap accepted")]
        assert f"offsets {lost}.." in accepted
