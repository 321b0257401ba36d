"""The Spark scheduler pools of a subscriber's driver (subscriber/spark_pools.xml), on real Spark:
which thread's job gets a free core when another job holds both.

* a starting agent's job (DeltaStore.in_import_thread(True)) runs before the rest of an import
  job queued before it; once the agent is ready (False), its job waits its turn;
* an import's job runs before the rest of a maintenance job (in_maintenance_thread) queued
  before it.

Each case runs a long job of many short tasks in one thread, then a job of one task in another
that counts the long job's tasks finished by the time it runs: an order, not a time.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from subscriber.store.delta import DeltaStore
from tests import services

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not services.java_available(), reason="Spark needs Java (17+)"),
]

# 24 tasks of 0.25 s on local[2]'s two slots: 3 s of queued tasks behind the first two.
LONG_TASKS, TASK_S = 24, 0.25
JOB_TIMEOUT_S = 120.0

Setup = Callable[[DeltaStore], None]


def _importing(store: DeltaStore) -> None:
    store.in_import_thread(False)


def _starting(store: DeltaStore) -> None:
    store.in_import_thread(True)


def _maintaining(store: DeltaStore) -> None:
    store.in_maintenance_thread()


def _long_job(spark: Any, finished: str) -> None:
    """LONG_TASKS tasks of TASK_S each; each leaves a file in ``finished`` when done."""

    def task(index: int) -> None:
        time.sleep(TASK_S)
        (Path(finished) / str(index)).touch()

    spark.sparkContext.parallelize(range(LONG_TASKS), LONG_TASKS).foreach(task)


def _short_job(spark: Any, finished: str) -> int:
    """One task: how many of the long job's tasks had finished when it ran."""
    counted = spark.sparkContext.parallelize([0], 1).map(lambda _: len(os.listdir(finished)))
    return int(counted.collect()[0])


def _short_job_first(spark: Any, tmp_path: Path, long_setup: Setup, short_setup: Setup) -> bool:
    """Whether a one-task job of a thread set up by ``short_setup`` runs before the tail of a
    long job that a thread set up by ``long_setup`` started first."""
    finished = tmp_path / "finished"
    finished.mkdir()
    errors: list[BaseException] = []
    seen: list[int] = []

    def run_long() -> None:
        try:
            long_setup(DeltaStore(spark.newSession(), str(tmp_path / "long")))
            _long_job(spark, str(finished))
        except BaseException as exc:  # reported by the test's thread
            errors.append(exc)

    def run_short() -> None:
        try:
            short_setup(DeltaStore(spark.newSession(), str(tmp_path / "short")))
            seen.append(_short_job(spark, str(finished)))
        except BaseException as exc:  # reported by the test's thread
            errors.append(exc)

    long = threading.Thread(target=run_long)
    long.start()
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while not tracker.getActiveStageIds() and time.monotonic() < deadline:
        time.sleep(0.02)  # the long job holds both slots before the short one is submitted
    short = threading.Thread(target=run_short)
    short.start()
    for thread in (short, long):
        thread.join(JOB_TIMEOUT_S)
    assert not errors, errors
    assert seen, "the short job did not end"
    # Behind the long job, the short one's task gets a slot once all of the long job's tasks
    # started: at most two (the slots) are still running then. Before it, as soon as the
    # first slot is free.
    return seen[0] < LONG_TASKS - 2


@pytest.mark.parametrize(
    ("long_setup", "short_setup", "short_first"),
    [
        pytest.param(_importing, _starting, True, id="starting-agent-before-imports"),
        pytest.param(_importing, _importing, False, id="ready-agent-after-imports-before-it"),
        pytest.param(_maintaining, _importing, True, id="import-before-maintenance"),
    ],
)
def test_a_free_core_goes_to_the_pool_that_comes_first(
    spark: Any, tmp_path: Path, long_setup: Setup, short_setup: Setup, short_first: bool
) -> None:
    assert _short_job_first(spark, tmp_path, long_setup, short_setup) is short_first
