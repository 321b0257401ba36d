"""Pause and resume on the embedded journal with the in-memory store (tests/subscriber/pause.py),
hostile commands included."""

from __future__ import annotations

from functools import partial

from subscriber.store.memory import MemoryStore
from tests.subscriber import pause
from tests.subscriber.harness import Env


def test_a_pause_holds_imports_across_a_restart_and_resume_imports_the_rest_once(
    local_env: Env,
) -> None:
    pause.paused_across_a_restart(local_env, partial(local_env.memory_agent, MemoryStore()))


def test_forged_foreign_and_unnumbered_pause_commands_pause_nothing(local_env: Env) -> None:
    pause.hostile_pause_commands(local_env, partial(local_env.memory_agent, MemoryStore()))
