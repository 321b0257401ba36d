"""Staged (canary) import scenarios, run on each journal and store
(tests/subscriber/unit/test_staging.py: embedded journal and in-memory stores;
tests/subscriber/integration/test_staging.py: Kafka, S3 and Delta): a canary subscriber and a
subscriber staged after it, each with its own store, the canary's statuses read by the staged
one's own status reader thread; its queue state as the publisher derives it from its
announcements (publisher.discovery, publisher.queues.views)."""

from __future__ import annotations

import time
from collections.abc import Callable

from journal.wire import messages as m
from publisher.discovery import subscriber_of
from publisher.queues.views import held_state
from subscriber.agent import SubscriberAgent
from tests.subscriber import harness as h
from tests.subscriber.harness import Env
from tests.subscriber.packages import node, package
from tests.waiting import wait_for

ADD = m.ReqType.ADD
MakeAgent = Callable[..., SubscriberAgent]
CANARY = "canary"
STAGED = "staged"
# The canary refuses packages above this size (a permanent failure, REMOVED_FAILED); the staged
# subscriber takes them: content that breaks the canary only.
CANARY_MAX_BYTES = 4096
# How long a waiting or held subscriber is watched for an import it must not make: several of
# its polls (50 ms) and of its waits' steps.
HELD_S = 1.0


def send(env: Env, name: str, size: int = 0, *, spilled: bool = False) -> int:
    """A package for /p/{name} (``spilled``: by reference, in the blob store); ``size`` bytes
    of property make one the canary refuses."""
    props = {"blob": "x" * size} if size else {}
    pkg = package(name, ADD, [(f"/p/{name}", True)], [node(f"/p/{name}", **props)])
    return env.send(pkg, blobs=env.blobs if spilled else None)


def statuses_of(env: Env, subscriber: str) -> dict[int, str]:
    """The statuses ``subscriber`` sent, by offset."""
    return {
        msg.offset: m.Status.Name(msg.status)
        for _, msg in h.read_messages(env.journal, env.js.topics.status)
        if isinstance(msg, m.PackageStatusMessage) and msg.sub_agent_name == subscriber
    }


def queue_state(env: Env, subscriber: str) -> str | None:
    """The state the publisher's queue of ``subscriber`` takes from its last announcement on
    the discovery topic (None: nothing holds it back, or no announcement yet)."""
    announced = [
        msg
        for _, msg in h.read_messages(env.journal, env.js.topics.discovery)
        if isinstance(msg, m.DiscoveryMessage) and msg.sub_agent_name == subscriber
    ]
    state = held_state(subscriber_of(announced[-1], 0)) if announced else None
    return state.value if state is not None else None


def metric(agent: SubscriberAgent, name: str) -> float:
    return agent.metrics.registry.get_sample_value(name, {"agent": agent.name}) or 0.0


def held(agent: SubscriberAgent, offset: int, state: str) -> None:
    """The agent stays at ``offset`` (the store commits content with its offset: nothing after
    it is imported), in ``state``, on /health too."""
    time.sleep(HELD_S)
    assert agent.processed_offset == offset
    assert agent.state == state
    health = agent.health()
    assert health.state == state
    assert health.canary_wait is not None
    assert health.canary_wait.offset == offset + 1


def canary_gates_the_staged_import(
    env: Env, make_canary: MakeAgent, make_staged: MakeAgent
) -> None:
    """The staged subscriber waits until the canary imported a package; a package the canary
    failed for good holds it (across a restart of the staged subscriber) until a clear skips
    it."""
    first = [send(env, "a", spilled=True), send(env, "b")]
    staged = make_staged().start()
    canary: SubscriberAgent | None = None
    try:
        wait_for(lambda: staged.state == "WAITING_FOR_CANARY", 60, "the staged one waiting")
        held(staged, first[0] - 1, "WAITING_FOR_CANARY")
        wait = staged.health().canary_wait
        assert wait is not None
        assert (wait.pending, wait.failed) == ([CANARY], [])
        wait_for(lambda: queue_state(env, STAGED) == "WAITING_FOR_CANARY", 60, "announced")
        assert metric(staged, "scd_canary_waiting") == 1.0

        canary = make_canary().start()
        wait_for(lambda: staged.processed_offset == first[-1], 120, "imported after the canary")
        assert canary.processed_offset >= first[-1]

        broken = send(env, "broken", size=CANARY_MAX_BYTES)
        after = send(env, "after")
        wait_for(lambda: canary.processed_offset == after, 120, "the canary past both")
        assert statuses_of(env, CANARY)[broken] == "REMOVED_FAILED"
        wait_for(lambda: staged.state == "CANARY_FAILED", 60, "the staged one held")
        held(staged, broken - 1, "CANARY_FAILED")
        wait = staged.health().canary_wait
        assert wait is not None
        assert wait.failed == [CANARY]
        wait_for(lambda: queue_state(env, STAGED) == "CANARY_FAILED", 60, "hold announced")
        assert metric(staged, "scd_canary_held") == 1.0
        instance = staged.instance_id
    finally:
        staged.stop()

    # The hold derives from the status topic, not from a file: a restart holds again.
    staged = make_staged().start()
    try:
        wait_for(lambda: staged.state == "CANARY_FAILED", 60, "held again after the restart")
        held(staged, broken - 1, "CANARY_FAILED")
        h.send_clear(env.journal, env.js, instance, STAGED, broken)
        wait_for(lambda: staged.processed_offset == after, 120, "cleared, the rest imported")
        assert statuses_of(env, STAGED)[broken] == "REMOVED"
        wait_for(lambda: queue_state(env, STAGED) is None, 60, "the release announced")
        paths = h.stored_paths(staged.store)
        assert {"/p/a", "/p/b", "/p/after"} <= paths
        assert "/p/broken" not in paths
        assert metric(staged, "scd_canary_held") == 0.0
    finally:
        staged.stop()
        if canary is not None:
            canary.stop()
