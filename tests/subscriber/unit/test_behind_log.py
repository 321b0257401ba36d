"""Lag beyond retention (subscriber/bookkeeper/behind_log.py): a subscriber whose next offset the
package topic deleted stops importing (BEHIND_LOG, not ready, counted, one ERROR line) until it is
restarted with --accept-gap, which skips that one gap, records it in the store and counts it.

On the embedded journal with a package topic of a quarter second's retention, on in-memory
stores; tests/subscriber/integration/test_behind_log.py runs them on real Kafka too, and once on
a Delta store."""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from blobstore.factory import open_blob_store
from journal.api import Journal
from journal.content.package import ContentPackage
from journal.errors import JournalUnavailable
from journal.factory import open_journal
from journal.kafka.consumer import KafkaConsumer, consumer_config
from journal.kafka.journal import KafkaJournal
from journal.sqlite.journal import SqliteJournal
from journal.wire import messages as m
from subscriber.agent import SubscriberAgent
from subscriber.settings import SubscriberSettings
from subscriber.store.memory import MemoryStore
from tests.journal.retention import expire_now
from tests.services import KafkaService
from tests.subscriber import harness as h
from tests.subscriber.harness import Env
from tests.subscriber.packages import node, package
from tests.waiting import wait_for

# Package topic retention per backend: the embedded journal applies it on demand (expire_now);
# the test broker checks every 5 s and deletes closed segments (as the spill cleanup test).
RETENTION_MS = {"sqlite": 250, "kafka": 4000}

# The announcement beat, on which a subscriber behind the log checks again (10 s by default).
RECHECK_S = 0.1


def good(name: str) -> ContentPackage:
    return package(name, m.ReqType.ADD, [(f"/{name}", True)], [node(f"/{name}", title=name)])


@contextmanager
def short_retention_env(
    kafka: KafkaService | None, unique_name: str, tmp_path: Path
) -> Iterator[Env]:
    """A journal (embedded, or Kafka when given) whose package topic keeps records a few
    seconds; local blobs (inline packages only)."""
    backend = "sqlite" if kafka is None else "kafka"
    js = h.journal_settings(kafka, unique_name, tmp_path)
    topics = js.topics.model_copy(update={"package_retention_ms": RETENTION_MS[backend]})
    js = js.model_copy(update={"topics": topics})
    bs = h.blob_settings(None, unique_name, tmp_path)
    with open_journal(js) as journal, open_blob_store(bs) as blobs:
        h.create_topics(journal, js)
        wait_for(lambda: answers(journal, js.topics.package), 30, "the new topic's leader")
        yield Env(journal, js, blobs, bs, tmp_path)


@pytest.fixture
def short_env(unique_name: str, tmp_path: Path) -> Iterator[Env]:
    """The embedded journal with a short retention (Kafka: the integration suite's
    test_behind_log.py runs these tests again)."""
    with short_retention_env(None, unique_name, tmp_path) as env:
        yield env


def answers(journal: Journal, topic: str) -> bool:
    """A topic Kafka just created has no leader for a moment (NOT_LEADER_FOR_PARTITION)."""
    try:
        journal.earliest_offset(topic)
    except JournalUnavailable:
        return False
    return True


def expire_through(env: Env, offset: int) -> None:
    """Wait until retention deleted every package up to ``offset``. The package sent to roll
    Kafka's segment may go too, later: tests do not count on it."""
    if isinstance(env.journal, KafkaJournal):
        # Kafka rolls a segment when a record comes once it is older than the retention.
        time.sleep(env.js.topics.package_retention_ms / 1000 + 0.3)
    env.send(good("rolls"))  # a closed segment is deleted, the active one never

    def deleted() -> bool:
        if isinstance(env.journal, SqliteJournal):
            expire_now(env.journal)
        return env.journal.earliest_offset(env.js.topics.package) > offset

    wait_for(deleted, 90, f"retention to delete offsets up to {offset}")


def metric(agent: SubscriberAgent, name: str, **labels: str) -> float:
    text = agent.metrics.render().decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels == {"agent": agent.name, **labels}:
                return float(s.value)
    raise AssertionError(f"no sample {name}{labels}")


def behind_log_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.ERROR and "BEHIND_LOG" in r.getMessage()
    ]


def run_for(agent: SubscriberAgent, seconds: float) -> None:
    """Run the import loop by hand, checking it imports nothing (each call waits a poll)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert agent.run_once() == 0


def test_packages_a_leader_wrote_follow_each_other_past_their_markers(short_env: Env) -> None:
    """A publisher's leader writes each batch in a transaction (on Kafka its marker takes the
    offset after it, which no consumer reads): offsets the log still holds between two
    packages are no gap (it was taken for one, and every subscriber stopped BEHIND_LOG at the
    second package of the compose cluster)."""
    env = short_env
    agent = env.memory_agent(MemoryStore())
    sent = [env.send(good(f"leader-{i}"), fenced=True) for i in range(3)]
    h.drive(agent, lambda: agent.processed_offset == sent[-1] or agent.state == "BEHIND_LOG")
    assert agent.state != "BEHIND_LOG", agent.ready()
    assert agent.processed_offset == sent[-1]
    assert all(agent.store.node(f"/leader-{i}") is not None for i in range(3))


def test_a_subscriber_restarted_behind_the_log_stops_until_the_gap_is_accepted(
    short_env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    env = short_env
    caplog.set_level(logging.INFO)
    store = MemoryStore()
    first = env.memory_agent(store)
    seen = env.send(good("seen"))
    h.drive(first, lambda: first.processed_offset == seen)
    first.stop()
    # Stopped longer than the retention: two packages are deleted before it reads them.
    lost = [env.send(good("lost-1")), env.send(good("lost-2"))]
    expire_through(env, lost[-1])
    after = env.send(good("after"))
    history = list(store.history)

    behind = env.memory_agent(store, announce_interval_s=RECHECK_S)
    try:
        assert behind.state == "BEHIND_LOG"
        assert behind.health().state == "BEHIND_LOG"
        ready, reason = behind.ready()
        assert not ready
        assert f"offsets {lost[0]}.." in reason
        assert "--accept-gap" in reason
        # It stays alive, checks again on the announcement beat (RECHECK_S here), imports
        # nothing and says so once.
        run_for(behind, 3 * behind.settings.announce_interval_s)
        assert behind.state == "BEHIND_LOG"
        assert not behind.ready()[0]
        assert store.history == history
        assert store.node("/after") is None
        assert behind.processed_offset == seen
        # Its real processed offset, so the publisher's queue shows what it misses.
        assert all(s.offset == seen for s in behind.announcer.message().subscriber_state)
        (error,) = behind_log_errors(caplog)
        assert f"offsets {lost[0]}.." in error
        assert "--accept-gap" in error
        assert metric(behind, "scd_behind_log") == 1
        assert metric(behind, "scd_log_gaps_total", action="stopped") == 1
    finally:
        behind.stop()

    resumed = env.memory_agent(store, accept_gap=True, announce_interval_s=RECHECK_S)
    try:
        assert resumed.state != "BEHIND_LOG"
        assert metric(resumed, "scd_behind_log") == 0
        offset, reason = store.recorded_offsets[-1]
        assert offset >= lost[-1]
        assert offset < after
        assert reason.startswith(f"gap accepted: offsets {lost[0]}..{offset} ")
        assert "deleted by retention" in reason
        h.drive(resumed, lambda: resumed.processed_offset == after)
        assert store.node("/after") is not None
        assert store.node("/seen") is not None
        assert store.node("/lost-1") is None
        assert store.node("/lost-2") is None
        assert metric(resumed, "scd_log_gaps_total", action="skipped") == 1
        assert metric(resumed, "scd_skipped_gap_offsets_total") == offset - lost[0] + 1
        assert any(
            r.levelno == logging.WARNING and r.getMessage().startswith("sub: gap accepted: ")
            for r in caplog.records
        )
    finally:
        resumed.stop()


def test_a_gap_opening_while_it_runs_stops_it_even_with_accept_gap_set(
    short_env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """A flag left in the configuration accepts no gap but the one where the process starts:
    it warns at a start without a gap, and a gap opening while the subscriber runs (slower
    than the retention) stops it."""
    env = short_env
    caplog.set_level(logging.WARNING)
    store = MemoryStore()
    agent = env.memory_agent(store, accept_gap=True, announce_interval_s=RECHECK_S)
    try:
        assert any("no gap to accept" in r.getMessage() for r in caplog.records)
        seen = env.send(good("seen"))
        h.drive(agent, lambda: agent.processed_offset == seen)
        while agent.run_once():  # until the poll read ahead during the commit came back
            pass
        lost = [env.send(good("lost-1")), env.send(good("lost-2"))]
        expire_through(env, lost[-1])
        env.send(good("after"))
        if isinstance(env.journal, KafkaJournal):
            # Its librdkafka client fetched the two packages ahead already. One slower than its
            # fetch queue finds its position deleted, and auto.offset.reset moves it to the
            # earliest record without an error: such a client, at the deleted position.
            assert agent.loop._consumer is not None
            agent.loop._consumer.close()
            agent.loop._consumer = KafkaConsumer(
                env.js.topics.package,
                consumer_config({"bootstrap.servers": env.js.bootstrap_servers}),
                [TopicPartition(env.js.topics.package, 0, lost[0])],
                env.journal.stall_check_s,
                lambda topic, partition: env.journal.latest_offset(topic, partition),
            )
        h.drive(agent, lambda: agent.state == "BEHIND_LOG", timeout_s=30)
        assert store.node("/after") is None
        assert store.node("/lost-1") is None
        assert agent.processed_offset == seen
        assert store.history[-1][1] == seen
        assert not store.recorded_offsets or store.recorded_offsets[-1][0] < lost[0]
        assert f"offsets {lost[0]}.." in agent.ready()[1]
        assert len(behind_log_errors(caplog)) == 1
        assert metric(agent, "scd_log_gaps_total", action="stopped") == 1
        run_for(agent, 3 * agent.settings.announce_interval_s)
        assert store.node("/after") is None
        assert agent.processed_offset == seen
    finally:
        agent.stop()


def test_it_resumes_by_itself_once_the_log_has_its_offset_again(
    local_env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Behind the log it checks again on every announcement interval (a journal restored, a
    wrong earliest offset): once its next offset is there, it imports on, skipping nothing."""
    env = local_env
    store = MemoryStore()
    first = env.memory_agent(store)
    seen = env.send(good("seen"))
    h.drive(first, lambda: first.processed_offset == seen)
    first.stop()
    after = env.send(good("after"))
    topic = env.js.topics.package
    earliest = env.journal.earliest_offset
    monkeypatch.setattr(
        env.journal, "earliest_offset", lambda t, p=0: after + 5 if t == topic else earliest(t, p)
    )
    agent = env.memory_agent(store, announce_interval_s=RECHECK_S)
    try:
        assert agent.state == "BEHIND_LOG"
        assert f"offsets {after}..{after + 4}" in agent.ready()[1]
        monkeypatch.undo()
        h.drive(agent, lambda: agent.processed_offset == after, timeout_s=10)
        assert agent.state != "BEHIND_LOG"
        assert store.node("/after") is not None
        assert metric(agent, "scd_behind_log") == 0
        assert [r for _, r in store.recorded_offsets if "gap" in r] == []
    finally:
        agent.stop()


def test_the_cli_flag_sets_accept_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    from scd.cli import build_parser
    from subscriber import cli, daemon

    ran: list[bool] = []

    def run(settings: SubscriberSettings) -> int:
        ran.append(settings.accept_gap)
        return 0

    monkeypatch.setattr(daemon, "run", run)
    for argv, accept in ((["subscriber", "--accept-gap"], True), (["subscriber"], False)):
        args: argparse.Namespace = build_parser().parse_args(argv)
        assert cli.cmd_subscriber(args) == 0
        assert ran.pop() is accept
