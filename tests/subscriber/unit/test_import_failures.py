"""Failure classes of the import, on an in-memory store (no Spark): a package that can never be
imported is committed as REMOVED_FAILED with its batch and never blocks, whatever max_retries
says; a transient failure is retried (and blocks with max_retries = -1); clears are checked.

Every permanent class runs on the embedded journal (SQLite, local blobs) and on real Kafka
and S3."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import pytest

from journal import failure_events
from journal.api import Journal, Position
from journal.content import rules
from journal.content.package import (
    Binary,
    ContentPackage,
    MultiValue,
    Node,
    Value,
    encode_package,
)
from journal.wire import messages as m
from subscriber.store.memory import MemoryStore
from tests.blobstore.reading import read_blob
from tests.subscriber import harness as h
from tests.subscriber.harness import Env
from tests.subscriber.packages import node, package
from tests.waiting import wait_for

ADD, DELETE = m.ReqType.ADD, m.ReqType.DELETE


def good(pkg_id: str, path: str) -> ContentPackage:
    return package(pkg_id, ADD, [(path, True)], [node(path, title=pkg_id)])


def with_value(value: Value) -> ContentPackage:
    n = Node(path="/bad")
    n.properties["m"].CopyFrom(value)
    return package("bad", ADD, [("/bad", True)], [n])


def multi(*values: Value) -> Value:
    return Value(multi_value=MultiValue(values=list(values)))


def send_message(env: Env, message: m.PackageMessage, **headers: str) -> int:
    value, encoded = m.encode(message)
    return env.journal.send(env.js.topics.package, value, headers={**encoded, **headers})


def message_for(pkg: ContentPackage, **fields: Any) -> m.PackageMessage:
    data = encode_package(pkg)
    values: dict[str, Any] = {
        "pub_sling_id": "pub-1",
        "pub_agent_name": h.PUB,
        "pkg_id": pkg.package_id,
        "req_type": pkg.req_type,
        "pkg_type": "scd-content",
        "pkg_length": len(data),
        "pkg_binary": data,
    }
    values.update(fields)
    return m.PackageMessage(**values)


def bomb() -> bytes:
    """A package whose 20 MiB string compresses to ~20 KB (the subscriber's limit is 1 MiB)."""
    pkg = package("bomb", ADD, [("/bad", True)], [node("/bad", text="x" * (20 * 1024 * 1024))])
    raw = pkg.SerializeToString()
    return b"SCDP\x01\x01" + zlib.compress(raw, 9)


# name -> (sends the bad record, the text its failure names)
Sender = Callable[[Env], int]
PERMANENT: dict[str, tuple[Sender, str]] = {
    "mixed multi-value": (
        lambda e: e.send(with_value(multi(Value(string_value="a"), Value(long_value=1)))),
        "long and string",
    ),
    "date after 9999": (
        lambda e: e.send(with_value(Value(date_ms=rules.MAX_DATE_MS + 1))),
        "date-range",
    ),
    "date before 0001": (
        lambda e: e.send(with_value(Value(date_ms=rules.MIN_DATE_MS - 1))),
        "date-range",
    ),
    "binary in a list": (
        lambda e: e.send(with_value(multi(Value(binary_value=Binary(inline=b"x"))))),
        "binary-placement",
    ),
    "node outside its roots": (
        lambda e: e.send(package("out", ADD, [("/a", False)], [node("/a/b")])),
        "outside",
    ),
    "undecodable record": (
        lambda e: e.journal.send(
            e.js.topics.package, b"\xff\xfe garbage", headers={"type": "PackageMessage"}
        ),
        "undecodable",
    ),
    "unknown package version": (
        lambda e: e.send(good("v9", "/v9"), data=b"SCDP\x09\x00" + b"\x00" * 8),
        "version 9",
    ),
    "checksum mismatch": (
        lambda e: e.send(good("sum", "/sum"), declared_checksum="0" * 64),
        "checksum mismatch",
    ),
    "over the size limit": (lambda e: e.send(good("bomb", "/bad"), data=bomb()), "beyond"),
    "unknown request type": (
        lambda e: send_message(e, message_for(good("rt", "/rt"), req_type=200)),
        "unknown request type 200",
    ),
    "unknown package type": (
        lambda e: send_message(e, message_for(good("pt", "/pt"), pkg_type="other")),
        "package type",
    ),
    "package larger than declared": (
        lambda e: send_message(e, message_for(good("len", "/len"), pkg_length=3)),
        "message says 3",
    ),
}


@pytest.fixture
def any_env(local_env: Env) -> Env:
    """The environment of the tests that hold on every backend (Kafka: the integration suite's
    test_import_failures.py runs them again)."""
    return local_env


@pytest.mark.parametrize("case", sorted(PERMANENT))
def test_a_permanent_failure_is_committed_with_its_batch_and_never_blocks(
    any_env: Env, case: str
) -> None:
    env = any_env
    send_bad, reason = PERMANENT[case]
    first = env.send(good("g0", "/g0"))
    bad = send_bad(env)
    after = env.send(good("g2", "/g2"))
    store = MemoryStore()
    # Sling's defaults: blocking (max_retries -1), not editable; and the decoded-size limit low.
    agent = env.memory_agent(store, max_package_bytes=1024 * 1024)
    h.drive(agent, lambda: agent.processed_offset >= after, timeout_s=60)

    assert store.history[-1] == (first, after)  # one commit: the failure rides in the batch
    assert store.node("/g0") is not None
    assert store.node("/g2") is not None
    assert store.node("/bad") is None
    assert agent.retries == 0
    assert agent.counters.permanent_failures == 1
    assert h.statuses(env.journal, env.js) == {bad: "REMOVED_FAILED"}  # not editable: only it
    (log,) = [x for x in h.log_messages(env.journal, env.js) if x.offset == bad]
    assert log.message.startswith("permanent: ")
    assert reason in log.message
    assert log.pub_agent_name == h.PUB
    assert log.sub_agent_name == agent.name
    assert 'scd_permanent_import_errors_total{agent="sub"} 1.0' in agent.metrics.render().decode()
    assert 'scd_transient_import_errors_total{agent="sub"} 0.0' in agent.metrics.render().decode()


def test_a_missing_blob_is_transient_blocks_and_imports_once_it_appears(local_env: Env) -> None:
    env = local_env
    stuck = env.send(good("stuck", "/s"), blobs=env.blobs)
    data = read_blob(env.blobs, "packages/stuck")
    env.blobs.delete("packages/stuck")
    after = env.send(good("g1", "/g1"))
    agent = env.memory_agent(retry_initial_s=0.01, retry_max_s=0.02).start()
    try:
        wait_for(lambda: agent.retries >= 3, 30)
        assert agent.state == "BLOCKED"
        assert agent.processed_offset == stuck - 1
        env.blobs.put_bytes("packages/stuck", data)
        wait_for(lambda: agent.processed_offset == after, 30)
    finally:
        agent.stop()
    store = agent.store
    assert isinstance(store, MemoryStore)
    assert store.node("/s") is not None
    assert store.committed_offsets().count(stuck) == 1
    logs = [x for x in h.log_messages(env.journal, env.js) if x.offset == stuck]
    assert logs
    assert all(x.message.startswith("attempt ") for x in logs)
    assert h.statuses(env.journal, env.js) == {}


def test_max_retries_gives_up_a_transient_failure_as_removed_failed(local_env: Env) -> None:
    env = local_env
    stuck = env.send(good("stuck", "/s"), blobs=env.blobs)
    env.blobs.delete("packages/stuck")
    after = env.send(good("g1", "/g1"))
    agent = env.memory_agent(max_retries=2, retry_initial_s=0.01, retry_max_s=0.02)
    h.drive(agent, lambda: agent.processed_offset >= after, timeout_s=30)
    attempts = [x for x in h.log_messages(env.journal, env.js) if x.offset == stuck]
    assert [x.message.split(":")[0] for x in attempts] == ["attempt 1", "attempt 2", "attempt 3"]
    assert h.statuses(env.journal, env.js) == {stuck: "REMOVED_FAILED"}


def test_a_package_given_up_after_its_retries_keeps_its_sequence_number(local_env: Env) -> None:
    """Given up (REMOVED_FAILED) or not, the record was genuine: its number counts as applied,
    so the package after it is no sequence gap (readiness stays true)."""
    env = local_env
    env.send(good("n1", "/n1"), sequence=1)
    stuck = env.send(good("n2", "/n2"), blobs=env.blobs, sequence=2)
    env.blobs.delete("packages/n2")
    last = env.send(good("n3", "/n3"), sequence=3)
    store = MemoryStore()
    agent = env.memory_agent(store, max_retries=1, retry_initial_s=0.01, retry_max_s=0.02)
    h.drive(agent, lambda: agent.processed_offset >= last, timeout_s=30)
    assert h.statuses(env.journal, env.js) == {stuck: "REMOVED_FAILED"}
    assert agent.loop.sequences.gap is None
    assert store.state is not None
    assert store.state.sequences[h.PUB] == 3
    # The status names the number too: another region's publisher places it by it.
    (status,) = [
        msg
        for _, msg in h.read_messages(env.journal, env.js.topics.status)
        if isinstance(msg, m.PackageStatusMessage)
    ]
    assert (status.offset, status.sequence) == (stuck, 2)


def test_announcements_and_failure_reports_carry_the_sequence_numbers(local_env: Env) -> None:
    """The numbers a publisher reading them from another region's copy places them by
    (docs/regions.md): the last applied per agent, and the failed package's."""
    env = local_env
    first = env.send(good("n1", "/n1"), sequence=1)
    agent = env.memory_agent(max_retries=0, retry_initial_s=0.01, retry_max_s=0.02)
    (state,) = agent.announcer.message().subscriber_state
    assert state.sequence == 0  # nothing applied yet
    h.drive(agent, lambda: agent.processed_offset >= first, timeout_s=30)
    (state,) = agent.announcer.message().subscriber_state
    assert (state.pub_agent_name, state.offset, state.sequence) == (h.PUB, first, 1)
    stuck = env.send(good("n2", "/n2"), blobs=env.blobs, sequence=2)
    env.blobs.delete("packages/n2")
    h.drive(agent, lambda: agent.processed_offset >= stuck, timeout_s=30)
    (attempt,) = [x for x in h.log_messages(env.journal, env.js) if x.offset == stuck]
    assert attempt.sequence == 2


def failure_events_on(journal: Journal, topic: str) -> list[failure_events.FailureEvent]:
    """Every failure event on the event topic, in the order of one partition (all of a
    subscriber's are keyed alike)."""
    found = []
    with journal.consumer(topic, Position.earliest()) as consumer:
        for _ in range(10):
            for r in consumer.poll(0.05):
                if failure_events.is_failure_event(r.headers):
                    found.append(failure_events.parse(r.value))
    return found


def test_every_failed_attempt_is_a_failure_event_saying_when_it_is_discarded(
    local_env: Env,
) -> None:
    env = local_env
    stuck = env.send(good("stuck", "/s"), blobs=env.blobs)
    env.blobs.delete("packages/stuck")
    bad = env.send(with_value(multi(Value(string_value="a"), Value(long_value=1))))
    after = env.send(good("g1", "/g1"))
    agent = env.memory_agent(max_retries=1, retry_initial_s=0.01, retry_max_s=0.02)
    h.drive(agent, lambda: agent.processed_offset >= after, timeout_s=30)

    events = failure_events_on(env.journal, env.js.topics.event)
    transient = [e for e in events if e.offset == stuck]
    assert [(e.attempt, e.will_discard) for e in transient] == [(1, False), (2, True)]
    assert {(e.error_class, e.max_retries, e.package_id) for e in transient} == {
        ("transient", 1, "stuck")
    }
    (permanent,) = [e for e in events if e.offset == bad]
    assert (permanent.attempt, permanent.will_discard, permanent.error_class) == (
        1,
        True,
        "permanent",
    )
    assert permanent.exception == "ContentRuleError"
    assert "long and string" in permanent.message
    assert {(e.pub_agent_name, e.sub_agent_name) for e in events} == {(h.PUB, agent.name)}
    assert {e.sub_sling_id for e in events} == {agent.instance_id}


def test_failures_are_reported_under_the_failing_packages_agent(local_env: Env) -> None:
    env = local_env
    env.send(good("a0", "/a0"))
    bad = send_message(
        env,
        message_for(
            with_value(multi(Value(long_value=1), Value(bool_value=True))), pub_agent_name="other"
        ),
    )
    agent = env.memory_agent(pub_agents=[h.PUB, "other"])
    h.drive(agent, lambda: agent.processed_offset >= bad, timeout_s=30)
    (log,) = h.log_messages(env.journal, env.js)
    assert (log.offset, log.pub_agent_name) == (bad, "other")
    status = [
        msg
        for _, msg in h.read_messages(env.journal, env.js.topics.status)
        if isinstance(msg, m.PackageStatusMessage)
    ]
    assert [(s.offset, s.pub_agent_name) for s in status] == [(bad, "other")]


def test_a_commit_the_store_refuses_is_retried_and_imported_once(local_env: Env) -> None:
    env = local_env
    offsets = [env.send(good(f"g{i}", f"/g{i}")) for i in range(3)]
    store = MemoryStore(fail_commits=2)
    agent = env.memory_agent(store)
    h.drive(agent, lambda: agent.processed_offset >= offsets[-1], timeout_s=30)
    assert store.committed_offsets() == offsets
    assert agent.counters.permanent_failures == 0
    assert agent.retries == 0


def test_batches_end_at_their_byte_budget(local_env: Env) -> None:
    env = local_env
    big = "x" * 100_000
    offsets = [
        env.send(package(f"b{i}", ADD, [(f"/b{i}", True)], [node(f"/b{i}", text=big)]))
        for i in range(10)
    ]
    store = MemoryStore()
    agent = env.memory_agent(store, batch_max_bytes=250_000)
    h.drive(agent, lambda: agent.processed_offset >= offsets[-1], timeout_s=30)
    sizes = [hi - lo + 1 for lo, hi in store.history]
    assert sum(sizes) == 10
    assert max(sizes) == 3
    assert store.committed_offsets() == offsets


def test_a_clear_applies_to_the_agent_it_names_and_not_beyond_the_log(local_env: Env) -> None:
    env = local_env
    stuck = env.send(good("stuck", "/s"), blobs=env.blobs)
    env.blobs.delete("packages/stuck")
    after = env.send(good("g1", "/g1"))
    agent = env.memory_agent(editable=True, retry_initial_s=0.01, retry_max_s=0.02).start()
    try:
        wait_for(lambda: agent.retries >= 2, 30)
        forged = m.CommandMessage(
            sub_sling_id=agent.instance_id,
            sub_agent_name=agent.name,
            pub_agent_name="someone-else",
            clear_command=m.ClearCommand(offset=stuck),
        )
        value, headers = m.encode(forged)
        env.journal.send(env.js.topics.command, value, headers=headers)
        h.send_clear(env.journal, env.js, agent.instance_id, agent.name, 2**62)
        retries = agent.retries
        wait_for(lambda: agent.retries >= retries + 3, 30)  # still blocked
        assert agent.processed_offset == stuck - 1
        text = agent.metrics.render().decode()
        assert 'scd_ignored_commands_total{agent="sub",reason="agent"} 1.0' in text
        assert 'scd_ignored_commands_total{agent="sub",reason="beyond-log"} 1.0' in text
        h.send_clear(env.journal, env.js, agent.instance_id, agent.name, stuck)
        wait_for(lambda: agent.processed_offset == after, 30)
    finally:
        agent.stop()
    assert agent.store.state is not None
    assert agent.store.state.clear_offset(h.PUB) == stuck
    assert agent.store.state.clear_offset("someone-else") == -1  # a clear names its agent


def test_other_agents_packages_are_skipped_and_stored_every_nth(local_env: Env) -> None:
    """Packages of agents not followed advance the offset without a commit of their own; the
    offset is stored at least every skip_store_every skips, and a restart resumes from it."""
    env = local_env
    others = [
        send_message(env, message_for(good(f"o{i}", f"/o{i}"), pub_agent_name="other"))
        for i in range(7)
    ]
    store = MemoryStore()
    agent = env.memory_agent(store, skip_store_every=3, batch_max=1)
    h.drive(agent, lambda: agent.processed_offset >= others[-1], timeout_s=30)
    assert store.tree == {}
    assert h.statuses(env.journal, env.js) == {}
    assert [hi for _, hi in store.history] == [others[2], others[5]]  # every 3rd skip stored
    again = env.memory_agent(store)
    assert again.processed_offset == others[5]  # the 7th is read again: harmless, a skip
