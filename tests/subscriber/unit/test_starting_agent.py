"""An agent that is not ready yet comes before those that serve: its import thread tells its
store so, and tells it again once ready (Store.in_import_thread: on Spark its jobs come before
the serving agents', tests/subscriber/integration/test_scheduler_pools.py); its open and its
commits take the daemon's commit slots ahead of theirs; an agent that stops while it waits for
a slot gives up the work it waited for. In-memory store, embedded journal."""

from __future__ import annotations

import threading

from journal.wire import messages as m
from subscriber.agent import SubscriberAgent
from subscriber.fleet.commit_slots import CommitSlots
from subscriber.store.base import StoreState
from subscriber.store.memory import MemoryStore
from tests.subscriber import harness as h
from tests.subscriber.harness import Env
from tests.subscriber.packages import node, package
from tests.waiting import wait_for


def test_the_import_thread_is_starting_until_the_agent_is_ready(local_env: Env) -> None:
    store = MemoryStore()
    # Not caught up by rule: an empty log would make it ready on open.
    agent = local_env.memory_agent(
        store, agent_name="starting", ready_force_s=None, ready_caught_up=False
    )
    for _ in range(3):
        agent.loop.step()  # nothing to import: not ready (idle for less than 10 s)
    assert store.import_thread_calls == [True]
    assert not agent.ready()[0]
    local_env.send(package("p1", m.ReqType.ADD, [("/a", True)], [node("/a")]))  # a recent one

    def imported() -> bool:
        agent.loop.step()
        return agent.processed_offset >= 0

    wait_for(imported, 30)
    assert agent.ready()[0]
    agent.loop.step()
    assert store.import_thread_calls == [True, False]  # told once each time


def test_the_agent_opens_and_commits_in_a_slot_ahead_of_serving_agents(local_env: Env) -> None:
    """Its open and its commits wait for a slot of the daemon's (subscriber.fleet
    .commit_slots), and go before a serving agent's waiting commit until it is ready."""
    slots = CommitSlots(1)
    settings = h.subscriber_settings(
        local_env.js, local_env.bs, local_env.tmp / "store", agent_name="joiner"
    )
    store = MemoryStore()
    agent = SubscriberAgent(settings, local_env.journal, store, local_env.blobs, commit_slots=slots)
    local_env.send(package("p1", m.ReqType.ADD, [("/a", True)], [node("/a")]))
    order: list[str] = []
    opening = store.open

    def open_store() -> StoreState:
        order.append("joiner opens")  # in its slot
        return opening()

    store.open = open_store  # type: ignore[method-assign]
    with slots.hold(starting=False):  # another agent commits
        serving = threading.Thread(target=lambda: _commit_as(slots, order), daemon=True)
        serving.start()
        wait_for(lambda: slots.waiting == 1, 10)
        joiner = threading.Thread(target=agent.open, daemon=True)
        joiner.start()
        wait_for(lambda: slots.waiting == 2, 10)  # its open waits for a slot too
        assert order == []
        assert b"scd_commit_slot_waiters 2.0" in agent.metrics.render()  # the daemon's
    for thread in (joiner, serving):
        thread.join(10)
    assert order == ["joiner opens", "serving agent commits"]
    with slots.hold(starting=False):
        stepping = threading.Thread(target=agent.loop.step, daemon=True)
        stepping.start()
        wait_for(lambda: slots.waiting == 1, 10)  # its commit waits
        assert agent.processed_offset < 0
    stepping.join(10)
    assert agent.processed_offset == 0


def _commit_as(slots: CommitSlots, order: list[str]) -> None:
    with slots.hold(starting=False):
        order.append("serving agent commits")


def test_an_agent_that_stops_while_waiting_for_a_slot_commits_nothing(local_env: Env) -> None:
    """A leaving agent does not wait for the fleet's commits: its step ends without the
    commit, without a failure report, and the package is still to import (from the store's
    offset, when the agent runs again)."""
    slots = CommitSlots(1)
    settings = h.subscriber_settings(
        local_env.js, local_env.bs, local_env.tmp / "store", agent_name="leaver"
    )
    store = MemoryStore()
    agent = SubscriberAgent(settings, local_env.journal, store, local_env.blobs, commit_slots=slots)
    agent.open()
    local_env.send(package("p1", m.ReqType.ADD, [("/a", True)], [node("/a")]))
    commits = len(store.history)
    with slots.hold(starting=False):  # another agent's commit that does not end
        stepping = threading.Thread(target=_step_until_polled, args=(agent,), daemon=True)
        stepping.start()
        wait_for(lambda: slots.waiting == 1, 30)  # polled, its commit waits
        agent.loop.stop.set()  # what agent.stop() sets first
        stepping.join(10)
        assert not stepping.is_alive(), "the stopping agent went on waiting for a slot"
        assert slots.waiting == 0
    assert len(store.history) == commits
    assert agent.processed_offset < 0
    assert agent.loop.retries.failed_attempts == 0
    assert agent.loop.counters.loop_restarts == 0


def _step_until_polled(agent: SubscriberAgent) -> None:
    while not agent.loop.stop.is_set():
        agent.loop.step()
