"""The subscriber agent end to end on real Kafka, a real S3 server and real Spark/Delta:
Sling scenarios 2, 5, 6, 7, 8 and garbage on the package topic."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from journal.wire import messages as m
from subscriber.agent import IDLE_CHECKPOINT_COMMITS, SubscriberAgent
from subscriber.hooks import ImportResult
from subscriber.hooks.invalidation import InvalidationHook
from subscriber.maintenance import delta_table
from subscriber.readiness import ReadyReason
from subscriber.store import current_tree
from subscriber.store.delta import DeltaStore
from tests.subscriber import harness as h
from tests.subscriber.harness import Env
from tests.subscriber.hooks import hooks_retry_discard_and_see_the_commit
from tests.subscriber.packages import file_node, node, package
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ADD, DELETE, TEST = m.ReqType.ADD, m.ReqType.DELETE, m.ReqType.TEST
# An agent on real Kafka and Spark gets through a few imports and retries well within this,
# even on a loaded 2-core machine.
AGENT_WAIT_S = 120.0


def store_paths(agent: SubscriberAgent) -> set[str]:
    assert isinstance(agent.store, DeltaStore)
    return h.stored_paths(agent.store)


def site(offset_tag: str, *paths: str) -> list[Any]:
    return [node(p, title=f"{p}@{offset_tag}") for p in paths]


def test_import_restart_and_clone(env: Env, spark: Any) -> None:
    """Scenarios 2 (spilled package imported) and 8 (restart and clone resume), with batching."""
    offsets = [
        env.send(package("p0", ADD, [("/site", True)], site("0", "/site", "/site/a", "/site/a/x"))),
        env.send(
            package("p1", ADD, [("/site/b", True)], [file_node("/site/b", b"\x00big" * 300_000)]),
            blobs=env.blobs,  # spilled: sent by reference
        ),
        env.send(package("p2", TEST, [("/site", False)])),
        env.send(
            package("p3", ADD, [("/foreign", True)], site("3", "/foreign")), pub_agent="other"
        ),
        env.send(package("p4", DELETE, [("/site/a", True)])),
        env.send(package("p5", ADD, [("/site", False)], site("5", "/site"))),
    ]
    agent = env.agent(spark)
    h.drive(agent, lambda: agent.processed_offset == offsets[-1])
    assert store_paths(agent) == {"/site", "/site/b"}
    assert agent.counters.commits < len(offsets)  # several packages per commit
    b = agent.store.node("/site/b")
    assert b is not None
    assert b.binaries["jcr:data"].data == b"\x00big" * 300_000
    top = agent.store.node("/site")
    assert top is not None
    assert top.properties["title"][2] == ["/site@5"]
    instance = agent.instance_id
    agent.stop()

    # Restart: resumes after the stored offset, imports only what is new.
    later = env.send(package("p6", ADD, [("/new", True)], site("6", "/new")))
    again = env.agent(spark)
    assert again.instance_id == instance
    assert again.processed_offset == offsets[-1]
    h.drive(again, lambda: again.processed_offset == later)
    assert store_paths(again) == {"/site", "/site/b", "/new"}

    # Clone: a copy of the table resumes from the copy's offset as a new instance.
    shutil.copytree(env.tmp / "store", env.tmp / "clone")
    again.stop()
    last = env.send(package("p7", ADD, [("/cloned", True)], site("7", "/cloned")))
    clone = env.agent(spark, store="clone")
    assert clone.instance_id != instance
    assert clone.processed_offset == later
    h.drive(clone, lambda: clone.processed_offset == last)
    assert store_paths(clone) == {"/site", "/site/b", "/new", "/cloned"}

    # No package applied twice: the committed offset ranges never overlap.
    assert isinstance(clone.store, DeltaStore)
    covered = h.committed_offsets(clone.store)
    assert len(covered) == len(set(covered)), covered
    clone.stop()


def test_max_retries_gives_removed_failed_and_moves_on(env: Env, spark: Any) -> None:
    """Scenario 5: max_retries=1 and an import that always fails."""
    good = env.send(package("g0", ADD, [("/a", True)], site("0", "/a")))
    bad = env.send(package("bad", ADD, [("/b", True)], site("1", "/b")), blobs=env.blobs)
    env.blobs.delete("packages/bad")  # the referenced blob is gone: every attempt fails
    after = env.send(package("g2", ADD, [("/c", True)], site("2", "/c")))
    agent = env.agent(spark, max_retries=1)
    h.drive(agent, lambda: agent.processed_offset == after)
    assert store_paths(agent) == {"/a", "/c"}
    assert h.statuses(env.journal, env.js) == {bad: "REMOVED_FAILED"}  # not editable: only this
    logs = h.log_messages(env.journal, env.js)
    assert [log.offset for log in logs] == [bad, bad]  # max_retries + 1 attempts
    assert "not found" in logs[0].message
    assert logs[0].sub_agent_name == "sub"
    assert good < bad < after
    agent.stop()


def test_garbage_on_the_package_topic(env: Env, spark: Any) -> None:
    """Undecodable, unknown version, missing blob, checksum mismatch: failed imports, clearly
    reported; an unknown record type is skipped; good packages around them are imported."""
    js, journal = env.js, env.journal
    journal.send(
        js.topics.package, b"\xff\x00garbage", headers={"type": "PackageMessage", "version": "1"}
    )
    future = b"SCDP" + bytes([9, 1]) + b"whatever"
    env.send(package("v9", ADD, [("/v", True)]), data=future)
    env.send(package("gone", ADD, [("/g", True)], site("g", "/g")), blobs=env.blobs)
    env.blobs.delete("packages/gone")
    env.send(package("sum", ADD, [("/s", True)], site("s", "/s")), declared_checksum="0" * 64)
    journal.send(js.topics.package, b"{}", headers={"type": "FuturePing", "version": "7"})
    last = env.send(package("ok", ADD, [("/ok", True)], site("ok", "/ok")))

    agent = env.agent(spark, max_retries=0)
    h.drive(agent, lambda: agent.processed_offset == last)
    assert store_paths(agent) == {"/ok"}
    failed = h.statuses(journal, js)
    assert sorted(failed.values()) == ["REMOVED_FAILED"] * 4
    reasons = " | ".join(log.message for log in h.log_messages(journal, js))
    for expected in ("undecodable", "format version 9", "not found", "checksum mismatch"):
        assert expected in reasons
    assert agent.counters.unknown_records == 1
    agent.stop()


def test_editable_clear_unblocks_and_commands_are_filtered(env: Env, spark: Any) -> None:
    """Scenarios 6 and 7: clears give REMOVED, unblock a stuck package, other subscribers'
    commands are ignored, clear offsets only grow."""
    first = env.send(package("e0", ADD, [("/e0", True)], site("0", "/e0")))
    stuck = env.send(package("stuck", ADD, [("/s", True)], site("s", "/s")), blobs=env.blobs)
    env.blobs.delete("packages/stuck")
    after = env.send(package("e2", ADD, [("/e2", True)], site("2", "/e2")))
    agent = SubscriberAgent(
        h.subscriber_settings(env.js, env.bs, env.tmp / "store", editable=True, max_retries=-1),
        env.journal,
        DeltaStore(spark, str(env.tmp / "store")),
        env.blobs,
    ).start()
    try:
        wait_for(lambda: agent.retries >= 3, AGENT_WAIT_S)  # blocked on the stuck package
        h.send_clear(env.journal, env.js, agent.instance_id, "someone-else", stuck)
        h.send_clear(env.journal, env.js, "another-instance", agent.name, stuck)
        retries = agent.retries
        wait_for(
            lambda: agent.retries >= retries + 3, AGENT_WAIT_S
        )  # still blocked: not our commands
        assert agent.processed_offset == first

        h.send_clear(env.journal, env.js, agent.instance_id, agent.name, stuck)
        wait_for(lambda: agent.processed_offset == after, AGENT_WAIT_S)
        assert store_paths(agent) == {"/e0", "/e2"}
        wait_for(lambda: len(h.statuses(env.journal, env.js)) == 3, AGENT_WAIT_S)
        assert h.statuses(env.journal, env.js) == {
            first: "IMPORTED",
            stuck: "REMOVED",
            after: "IMPORTED",
        }

        # A clear ahead of the log would skip packages not written yet: refused. A lower
        # clear than the one in force changes nothing: clear offsets only grow.
        h.send_clear(env.journal, env.js, agent.instance_id, agent.name, after + 2)
        wait_for(lambda: b'reason="beyond-log"} 1.0' in agent.metrics.render(), AGENT_WAIT_S)
        h.send_clear(env.journal, env.js, agent.instance_id, agent.name, first)
        added = [
            env.send(package(f"c{i}", ADD, [(f"/c{i}", True)], site("c", f"/c{i}")))
            for i in range(2)
        ]
        tail = env.send(package("tail", ADD, [("/tail", True)], site("t", "/tail")))
        wait_for(lambda: agent.processed_offset == tail, AGENT_WAIT_S)
        assert store_paths(agent) == {"/e0", "/e2", "/c0", "/c1", "/tail"}
        wait_for(lambda: len(h.statuses(env.journal, env.js)) == 6, AGENT_WAIT_S)
        got = h.statuses(env.journal, env.js)
        assert [got[o] for o in [*added, tail]] == ["IMPORTED"] * 3
        assert agent.store.state is not None
        assert agent.store.state.clear_offset(h.PUB) == stuck
    finally:
        agent.stop()


def test_import_hooks_on_kafka_and_delta(env: Env, spark: Any) -> None:
    """tests/subscriber/hooks.py on Kafka, S3 and Delta: the post hook reads the retried
    package back from the Delta table at the store's location with Spark, as an operator's
    hook would."""

    def read(result: ImportResult, path: str) -> Any:
        return current_tree.node(spark, result.store, path)

    hooks_retry_discard_and_see_the_commit(env, lambda **kw: env.agent(spark, **kw), read, {"t"})


def test_discovery_invalidate_hook_and_health(env: Env, spark: Any) -> None:
    """Announcements carry instance, offsets and configuration; INVALIDATE calls the
    invalidation hook; the health endpoint reports readiness and Prometheus metrics."""
    import httpx

    from subscriber.http import HealthServer

    invalidated: list[list[str]] = []
    settings = h.subscriber_settings(
        env.js,
        env.bs,
        env.tmp / "store",
        max_retries=3,
        editable=True,
        ready_idle_s=None,  # only the caught-up rule makes it ready
        ready_max_message_age_s=None,
        ready_force_s=None,
    )
    agent = SubscriberAgent(
        settings,
        env.journal,
        DeltaStore(spark, str(env.tmp / "store")),
        env.blobs,
        hooks={"invalidate": InvalidationHook(lambda paths, _pkg: invalidated.append([*paths]))},
    )
    first = env.send(package("a", ADD, [("/a", True)], site("0", "/a")))
    # Written as a publisher's leader writes: on Kafka its transaction's marker takes the
    # offset after it, which is no package left to import.
    inv = env.send(package("i", m.ReqType.INVALIDATE, [("/a", True)]), fenced=True)
    assert env.journal.latest_offset(env.js.topics.package) == inv + 2
    agent.start()
    with HealthServer(agent.health, agent.readiness.check, agent.metrics.render) as server:
        wait_for(lambda: agent.processed_offset == inv, AGENT_WAIT_S)
        assert invalidated == [["/a"]]
        assert store_paths(agent) == {"/a"}
        wait_for(lambda: httpx.get(f"{server.url}/ready").status_code == 200, AGENT_WAIT_S)
        # Caught up past the marker, which no record fills: the log's end at start is inv + 2.
        assert agent.readiness.reason is ReadyReason.CAUGHT_UP
        wait_for(lambda: agent.lag == 0, AGENT_WAIT_S, "the marker not counted as lag")
        health = httpx.get(f"{server.url}/health").json()
        assert health["processedOffset"] == inv
        assert health["state"] == "IDLE"
        assert health["instanceId"] == agent.instance_id
        metrics = httpx.get(f"{server.url}/metrics").text
        assert 'scd_imported_package_size_bytes_count{agent="sub"} 2.0' in metrics
        assert 'scd_package_status_count_total{agent="sub",status="IMPORTED"} 2.0' in metrics

        def announced() -> list[Any]:
            return [
                (rec, msg)
                for rec, msg in h.read_messages(env.journal, env.js.topics.discovery)
                if msg.subscriber_state and msg.subscriber_state[0].offset == inv
            ]

        found: list[Any] = []

        def some_announced() -> bool:
            found[:] = announced() or found  # a later read may come back empty under load
            return bool(found)

        wait_for(some_announced, AGENT_WAIT_S)
    agent.stop()
    msg = found[-1][1]
    assert msg.sub_sling_id == agent.instance_id
    assert msg.sub_agent_name == "sub"
    assert [(s.pub_agent_name, s.offset, s.retries) for s in msg.subscriber_state] == [
        (h.PUB, inv, 0)
    ]
    assert msg.subscriber_configuration.editable
    assert msg.subscriber_configuration.max_retries == 3
    assert first < inv


def test_failing_commit_in_a_batch_is_isolated_without_double_imports(
    env: Env, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package that breaks the batch commit itself: the batch is retried package by package,
    the bad one ends REMOVED_FAILED, the others are imported exactly once. (Content a Delta
    table cannot hold is stopped by the content rules before any commit; here Delta fails every
    commit holding the package, as a store failing on one file would.)"""
    offsets = [
        env.send(package("b0", ADD, [("/b0", True)], site("0", "/b0"))),
        env.send(package("b1", ADD, [("/b1", True)], site("1", "/b1"))),
        env.send(package("bad", ADD, [("/bad", True)], site("2", "/bad"))),
        env.send(package("b3", ADD, [("/b3", True)], site("3", "/b3"))),
    ]
    agent = env.agent(spark, max_retries=0, batch_max=10)
    store = agent.store
    assert isinstance(store, DeltaStore)
    original = store.commit

    def refuses_bad(changes: Any) -> None:
        if "/bad" in changes.upserts:
            raise RuntimeError("the store refuses /bad")
        original(changes)

    monkeypatch.setattr(store, "commit", refuses_bad)
    h.drive(agent, lambda: agent.processed_offset == offsets[-1])
    assert store_paths(agent) == {"/b0", "/b1", "/b3"}
    assert h.statuses(env.journal, env.js) == {offsets[2]: "REMOVED_FAILED"}
    assert "the store refuses /bad" in h.log_messages(env.journal, env.js)[0].message
    covered = h.committed_offsets(store)
    assert covered == sorted(set(covered)), covered  # nothing applied twice
    assert {offsets[0], offsets[1], offsets[3]} <= set(covered)
    agent.stop()


def test_statuses_committed_but_not_sent_are_sent_on_restart(env: Env, spark: Any) -> None:
    """A crash between the commit and the status send: the next start sends them."""
    import dataclasses

    from subscriber.store.delta import DeltaStore
    from tests.subscriber.packages import new_change_set

    offset = env.send(package("s0", ADD, [("/s", True)], site("0", "/s")))
    store = DeltaStore(spark, str(env.tmp / "store"))
    store.open()
    unit = h.unit_for(env.journal, env.js, offset)
    store.commit(new_change_set([dataclasses.replace(unit, status=m.Status.IMPORTED)]))
    assert h.statuses(env.journal, env.js) == {}  # committed, never sent: the "crash"

    agent = env.agent(spark, editable=True)  # open() resends what the store holds
    assert h.statuses(env.journal, env.js) == {offset: "IMPORTED"}
    agent.stop()


def test_the_agent_checkpoints_its_store_and_survives_a_failed_checkpoint(
    env: Env, spark: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Delta's own checkpoints are rare (store.CHECKPOINT_INTERVAL); the agent writes one when
    IDLE_CHECKPOINT_COMMITS commits were made, in the maintenance thread. A checkpoint that
    fails is logged and counted and does not stop the import loop."""
    store = env.tmp / "store"
    offsets = [
        env.send(package(f"c{i}", ADD, [(f"/c{i}", True)], site("c", f"/c{i}")))
        for i in range(IDLE_CHECKPOINT_COMMITS)
    ]
    agent = env.agent(spark, batch_max=1)  # one commit per package

    def broken(_spark: Any, _location: str) -> None:
        raise RuntimeError("checkpoint went wrong")

    monkeypatch.setattr(delta_table, "checkpoint", broken)
    maintenance = agent.maintenance
    h.drive(agent, lambda: agent.processed_offset == offsets[-1])
    assert agent.counters.commits == IDLE_CHECKPOINT_COMMITS
    assert agent.run_once() == 0  # idle: the loop goes on
    maintenance.wait(60)  # the checkpoint started in the maintenance thread, once
    assert maintenance.failures == 1
    assert "store maintenance checkpoint failed" in caplog.text
    assert h.last_checkpoint(store) is None
    # The next try after as many commits again (those made while it ran count towards it).
    assert agent.store.commits_since_checkpoint < IDLE_CHECKPOINT_COMMITS

    monkeypatch.undo()
    more = [
        env.send(package(f"d{i}", ADD, [(f"/d{i}", True)], site("d", f"/d{i}")))
        for i in range(IDLE_CHECKPOINT_COMMITS)
    ]
    h.drive(agent, lambda: agent.processed_offset == more[-1])
    h.drive(agent, lambda: h.last_checkpoint(store) is not None)
    maintenance.wait(60)
    assert maintenance.failures == 1
    assert "checkpoint" in [report.step for report in maintenance.reports]
    assert agent.store.commits_since_checkpoint < IDLE_CHECKPOINT_COMMITS
    agent.stop()


def test_an_unexpected_error_in_the_loop_resumes_from_the_stored_offset(
    env: Env, spark: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Records polled when the loop fails are not lost: the loop starts again from the offset
    in the store and imports each of them once."""
    offsets = [
        env.send(package(f"u{i}", ADD, [(f"/u{i}", True)], site("u", f"/u{i}"))) for i in range(3)
    ]
    agent = env.agent(spark)
    original = agent.loop._import
    failures: list[int] = []

    def fails_once(polled: list[Any]) -> None:
        if not failures:
            failures.append(polled[0][0].offset)
            raise RuntimeError("unexpected")
        original(polled)

    monkeypatch.setattr(agent.loop, "_import", fails_once)
    h.run_to_end_after_one_restart(agent, offsets, {f"/u{i}" for i in range(3)}, AGENT_WAIT_S)
    assert failures == [offsets[0]]
    assert "import loop failed" in caplog.text
    assert b'scd_import_loop_restarts_total{agent="sub"} 1.0' in agent.metrics.render()


def test_the_next_batch_is_prefetched_while_one_commits_and_reread_after_a_loop_restart(
    env: Env, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a batch commits, the next one is polled and decoded; when the loop restarts with
    a prefetched batch pending, that batch is dropped and read again from the stored offset."""
    offsets = [
        env.send(package(f"f{i}", ADD, [(f"/f{i}", True)], site("f", f"/f{i}"))) for i in range(6)
    ]
    agent = env.agent(spark, batch_max=2)
    # The first polls may come back empty while the consumer joins (a loaded machine).
    h.drive(agent, lambda: agent.processed_offset == offsets[1])
    assert agent.counters.last_batch == 2
    assert agent.loop._prefetched is not None
    assert [r.offset for r, _ in agent.loop._prefetched.result(AGENT_WAIT_S)] == offsets[2:4]
    assert all(d.package is not None for _, d in agent.loop._prefetched.result())  # decoded

    original = agent.bookkeeping.send_pending_statuses
    failed: list[int] = []

    def fails_once() -> None:  # after the second commit, with the third batch prefetched
        if not failed:
            failed.append(agent.processed_offset)
            raise RuntimeError("unexpected")
        original()

    monkeypatch.setattr(agent.bookkeeping, "send_pending_statuses", fails_once)
    h.run_to_end_after_one_restart(agent, offsets, {f"/f{i}" for i in range(6)}, AGENT_WAIT_S)
    assert failed == [offsets[3]]


def test_a_prefetched_batch_takes_the_records_that_came_after_it_too(
    env: Env, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prefetch returns with the first records that arrive during a commit; the import then
    also takes what arrived after them, as a poll after the commit would have."""
    offsets = [
        env.send(package(f"t{i}", ADD, [(f"/t{i}", True)], site("t", f"/t{i}"))) for i in range(4)
    ]
    # A poll waits long enough for the records (all sent already) on a loaded machine: a
    # prefetch that came back empty would make the import poll again instead of topping up.
    agent = env.agent(spark, batch_max=10, poll_timeout_s=5.0)
    original = agent.loop.poll
    calls: list[int | None] = []

    def first_record_only(
        timeout_s: float | None = None, max_records: int | None = None, held: int = 0
    ) -> Any:
        calls.append(max_records)
        # The first poll and the prefetch each return one record, as when one arrives alone.
        return original(timeout_s, 1 if len(calls) <= 2 else max_records, held)

    monkeypatch.setattr(agent.loop, "poll", first_record_only)
    h.drive(agent, lambda: agent.processed_offset == offsets[0])
    assert agent.counters.last_batch == 1
    h.drive(agent, lambda: agent.processed_offset == offsets[-1])
    assert agent.counters.commits == 2
    assert agent.counters.last_batch == 3
    assert calls[2] == 9  # the top-up asked for the rest of the batch
    agent.stop()
