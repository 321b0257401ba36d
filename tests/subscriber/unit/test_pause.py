"""Pause and resume on the embedded journal with the in-memory store (tests/subscriber/pause.py),
hostile commands included, and a retry held by a pause."""

from __future__ import annotations

import time
from functools import partial

from journal.wire import messages as m
from subscriber.store.memory import MemoryStore
from tests.blobstore.reading import read_blob
from tests.subscriber import pause
from tests.subscriber.harness import Env
from tests.subscriber.packages import node, package
from tests.subscriber.replays import Publisher
from tests.waiting import wait_for

ADD = m.ReqType.ADD


def test_a_pause_holds_imports_across_a_restart_and_resume_imports_the_rest_once(
    local_env: Env,
) -> None:
    pause.paused_across_a_restart(local_env, partial(local_env.memory_agent, MemoryStore()))


def test_forged_foreign_and_unnumbered_pause_commands_pause_nothing(local_env: Env) -> None:
    pause.hostile_pause_commands(local_env, partial(local_env.memory_agent, MemoryStore()))


def test_a_paused_subscriber_attempts_no_retry_until_resumed(local_env: Env) -> None:
    env = local_env
    stuck = env.send(package("stuck", ADD, [("/s", True)], [node("/s")]), blobs=env.blobs)
    data = read_blob(env.blobs, "packages/stuck")
    env.blobs.delete("packages/stuck")  # transient: retried until it appears
    after = env.send(package("after", ADD, [("/a", True)], [node("/a")]))
    commands = pause.Commands(env, Publisher(env))
    agent = env.memory_agent(retry_initial_s=0.01, retry_max_s=0.02).start()
    try:
        wait_for(lambda: agent.retries >= 2, 30, "retries of the stuck package")
        commands.send(commands.message(agent, True), signed=False)  # no keys configured
        wait_for(lambda: agent.state == "PAUSED", 30, "the subscriber paused")
        attempts = agent.loop.retries.failed_attempts
        env.blobs.put_bytes("packages/stuck", data)
        time.sleep(pause.HELD_S)
        assert agent.loop.retries.failed_attempts in (attempts, attempts + 1)  # one in flight
        assert agent.processed_offset == stuck - 1
        commands.send(commands.message(agent, False), signed=False)
        wait_for(lambda: agent.processed_offset == after, 30, "the rest imported")
    finally:
        agent.stop()
    store = agent.store
    assert isinstance(store, MemoryStore)
    assert store.committed_offsets().count(stuck) == 1
