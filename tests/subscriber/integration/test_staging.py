"""Staged (canary) import on Kafka, S3 and Delta (tests/subscriber/staging.py): two Spark
subscribers, a canary and one staged after it, each with its Delta store. The staged one waits
until the canary imported a package (the first one spilled to the S3 blob store), a package the
canary failed for good holds it, across its restart, and a clear releases it; its discovery
announcements give its queue on the publisher WAITING_FOR_CANARY, then CANARY_FAILED, then
nothing. Hostile status
records, the resume and the wait timeouts run on the fast suite
(tests/subscriber/unit/test_staging.py)."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from tests.subscriber import staging
from tests.subscriber.harness import Env

pytestmark = pytest.mark.integration


def test_the_staged_import_waits_for_the_canary_and_a_failure_holds_until_cleared(
    env: Env, spark: Any
) -> None:
    # No idle-time store maintenance: it would only delay the imports this test waits for.
    agent = partial(env.agent, spark, editable=True, maintenance_enabled=False)
    staging.canary_gates_the_staged_import(
        env,
        partial(agent, store=staging.CANARY, agent_name=staging.CANARY,
                max_package_bytes=staging.CANARY_MAX_BYTES),
        partial(agent, store=staging.STAGED, agent_name=staging.STAGED,
                staged_after=[staging.CANARY], staged_wait_s=5.0),
    )  # fmt: skip
