"""The subscriber's background threads are supervised: a failing one is restarted and counted,
and the subscriber is not ready while it is down. (In-memory store, embedded journal.)"""

from __future__ import annotations

import pytest

from tests.subscriber.harness import Env
from tests.waiting import wait_for


def test_a_failing_announcer_is_restarted_and_the_subscriber_not_ready_meanwhile(
    local_env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A name of its own: the restart counter is process-wide, labelled by thread name.
    agent = local_env.memory_agent(agent_name="supervised", ready_force_s=0.0)
    failures: list[int] = []
    original = agent.announcer.announce

    def announce() -> None:
        if len(failures) < 3:
            failures.append(1)
            raise RuntimeError("announcer bug")
        original()

    monkeypatch.setattr(agent.announcer, "announce", announce)
    agent.start()
    try:
        wait_for(lambda: not agent.ready()[0], 10)
        _, reason = agent.ready()
        assert "supervised-announce" in reason
        assert "RuntimeError" in reason
        wait_for(lambda: len(failures) == 3 and agent.ready()[0], 30)
        text = agent.metrics.render().decode()
        assert 'scd_thread_restarts_total{thread="supervised-announce"} 3.0' in text
    finally:
        agent.stop()
