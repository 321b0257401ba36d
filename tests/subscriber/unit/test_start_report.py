"""A subscriber is ready once caught up to the log's end as it was when its store opened, and
says in /health how long each phase of its start took (subscriber.start_report)."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from subscriber.agent import SubscriberAgent
from subscriber.readiness import ReadyReason
from subscriber.start_report import StartReport, process_started
from subscriber.store.memory import MemoryStore
from tests.subscriber import harness as h
from tests.subscriber.harness import Env
from tests.subscriber.unit.test_behind_log import good
from tests.waiting import wait_for

# Only the caught-up rule: Sling's would make it ready by idleness or a recent package.
ONLY_CAUGHT_UP = {"ready_idle_s": None, "ready_max_message_age_s": None, "ready_force_s": None}


def test_the_process_start_comes_from_the_kernel_not_from_the_import() -> None:
    started = process_started()
    assert started <= time.time()
    # This test process started before pytest collected this module.
    assert time.time() - started > 0.01
    assert os.path.exists("/proc/self/stat")


def test_milestones_count_from_the_process_start_once_each_and_children_share_the_parent() -> None:
    process = StartReport(started=1000.0)
    process.mark("process", 1000.5)
    process.mark("process", 1009.0)  # reached once: the first mark counts
    agent = process.child()
    agent.mark("store_open", 1002.25)
    process.mark("spark", 1001.0)
    assert agent.phases() == {"process": 0.5, "spark": 1.0, "store_open": 2.25}
    assert process.phases() == {"process": 0.5, "spark": 1.0}
    assert StartReport(started=1000.0).phases() == {}


def test_caught_up_to_the_log_s_end_at_open_makes_it_ready(local_env: Env) -> None:
    env = local_env
    sent = [env.send(good(f"p{i}")) for i in range(5)]
    agent = env.memory_agent(**ONLY_CAUGHT_UP)
    assert not agent.ready()[0]
    later = env.send(good("after-open"))  # after the goal was fixed: not waited for
    h.drive(agent, lambda: agent.processed_offset >= sent[-1])
    ready, reason = agent.ready()
    assert ready, reason
    assert agent.readiness.reason is ReadyReason.CAUGHT_UP
    assert f"offset {sent[-1] + 1}" in reason
    phases = agent.health().start
    assert list(phases) == ["store_open", "caught_up"]
    assert 0 < phases["store_open"] <= phases["caught_up"]
    h.drive(agent, lambda: agent.processed_offset == later)


def test_a_store_already_at_the_log_s_end_is_ready_on_open(local_env: Env) -> None:
    env = local_env
    agent = env.memory_agent(**ONLY_CAUGHT_UP)
    ready, reason = agent.ready()
    assert ready, reason
    assert agent.readiness.reason is ReadyReason.CAUGHT_UP


def test_a_paused_subscriber_is_not_caught_up(local_env: Env) -> None:
    env = local_env
    store = MemoryStore()
    first = env.memory_agent(store, **ONLY_CAUGHT_UP)
    store.record_pause(True, "publisher", 1)
    first.stop()
    env.send(good("one"))
    agent = env.memory_agent(store, **ONLY_CAUGHT_UP)  # reopened paused, already at the end
    assert agent.commands.paused
    for _ in range(3):
        agent.run_once()
    assert not agent.ready()[0]


@pytest.mark.parametrize("rule_on", [True, False])
def test_the_rule_can_be_turned_off(local_env: Env, rule_on: bool) -> None:
    env = local_env
    agent = env.memory_agent(ready_caught_up=rule_on, **ONLY_CAUGHT_UP)
    agent.run_once()
    assert agent.ready()[0] is rule_on


def test_with_the_read_api_it_is_ready_only_once_the_read_model_answers(local_env: Env) -> None:
    env = local_env
    sent = env.send(good("page"))
    settings = h.subscriber_settings(env.js, env.bs, env.tmp / "store", **ONLY_CAUGHT_UP)
    agent = SubscriberAgent(settings, env.journal, MemoryStore(), env.blobs)
    assert agent.reads is not None
    build = agent.reads._source
    release = threading.Event()

    def slow_build() -> Any:
        release.wait(30)
        return build()

    agent.reads._source = slow_build
    agent.start()  # its read model too
    try:
        wait_for(lambda: agent.processed_offset == sent, 30, "the import")
        wait_for(lambda: agent.readiness.reason is ReadyReason.CAUGHT_UP, 30, "caught up")
        ready, reason = agent.ready()
        assert not ready
        assert "the read model is being built" in reason
        assert "reads" not in agent.health().start
        release.set()
        wait_for(lambda: agent.ready()[0], 30, "ready once the model answers")
        phases = agent.health().start
        assert phases["caught_up"] <= phases["reads"]
    finally:
        release.set()
        agent.stop()
