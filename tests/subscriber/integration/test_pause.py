"""Pause and resume on Kafka with the Delta store (tests/subscriber/pause.py): the pause holds
imports, survives a restart of the subscriber (the state is in the Delta table), and resume
imports the rest exactly once. The refusal of hostile commands runs on the fast suite."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from tests.subscriber import pause
from tests.subscriber.harness import Env

pytestmark = pytest.mark.integration


def test_a_pause_holds_imports_across_a_restart_and_resume_imports_the_rest_once(
    env: Env, spark: Any
) -> None:
    # No idle-time store maintenance: it would only delay the imports this test waits for.
    pause.paused_across_a_restart(env, partial(env.agent, spark, maintenance_enabled=False))
