"""An agent that is not ready yet tells its store so from its import thread, and tells it again
once ready (Store.in_import_thread: on Spark its jobs come before the serving agents' until
then, tests/subscriber/integration/test_scheduler_pools.py). In-memory store, embedded
journal."""

from __future__ import annotations

from journal.wire import messages as m
from subscriber.store.memory import MemoryStore
from tests.subscriber.harness import Env
from tests.subscriber.packages import node, package
from tests.waiting import wait_for


def test_the_import_thread_is_starting_until_the_agent_is_ready(local_env: Env) -> None:
    store = MemoryStore()
    agent = local_env.memory_agent(store, agent_name="starting", ready_force_s=None)
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
