"""Hostile records on every topic of running subscribers (and their publisher): afterwards a
valid package distributed through the publisher is imported by every subscriber, no thread
died, no loop was restarted, and every endpoint answers (the subscribers' /ready included).

* On in-memory stores (the import logic without Spark): a Hypothesis loop of batches on the
  embedded journal, each followed by a valid package that both subscribers must import.
* On Delta stores (Spark), once per journal backend, embedded and real Kafka: one batch of
  hand-picked and generated records (a fixed seed), then the valid package.

Commands addressed to the real subscribers only clear offsets that are negative or far beyond
the log's end, which a subscriber must refuse; package references in the batches
are malformed, never well-formed references to missing blobs (those are transient by design:
a subscriber waits for the blob, so nothing behind such a record could be imported).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

from subscriber.store.delta import DeltaStore
from subscriber.store.memory import MemoryStore
from tests.fuzz import records as r
from tests.fuzz.curated import curated_records
from tests.fuzz.subscribers_under_fire import SubscribersUnderFire
from tests.services import KafkaService

pytestmark = pytest.mark.slow

# Batches against the in-memory subscribers: each is read by three agents and followed by a
# package both subscribers import (about half a second per batch).
MEMORY_EXAMPLES = 40
# Generated records in the one Spark batch, besides the hand-picked ones; the subscribers
# decode every one and commit the followed agent's failures with the batch.
SPARK_RECORDS = 60
# Importing the valid package behind the garbage: seconds in memory; a few Delta commits on a
# loaded 2-core machine take a minute at worst.
MEMORY_IMPORT_TIMEOUT_S = 60.0
SPARK_IMPORT_TIMEOUT_S = 120.0


@pytest.fixture(params=["unsigned", "signed"])
def memory_fire(
    request: pytest.FixtureRequest, tmp_path: Path, unique_name: str
) -> Iterator[SubscribersUnderFire]:
    """Subscribers on in-memory stores; ``signed``: with keys configured, so that every hostile
    package is unsigned (refused as permanent) and every hostile clear ignored."""
    fire = SubscribersUnderFire.start(
        tmp_path,
        unique_name,
        None,
        lambda _: MemoryStore(),
        signed=request.param == "signed",
    )
    yield fire
    fire.close()


def test_memory_subscribers_import_a_valid_package_after_every_batch(
    memory_fire: SubscribersUnderFire,
) -> None:
    fire = memory_fire
    fire.restarts_before = fire.restart_counts()
    agents = [fire.agent_name, "other"]
    batches: list[int] = []

    @settings(
        max_examples=MEMORY_EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        # The agents keep every batch's state: the failing batch is reported as generated.
        phases=[Phase.generate],
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        batch=st.lists(r.garbage(agents, fire.targets, any_blob_ref=False), min_size=1, max_size=6)
    )
    def fuzz(batch: list[r.Garbage]) -> None:
        note(repr(batch))
        fire.write(r.control_sized(batch))
        path = f"/fuzz-check/{len(batches)}"
        fire.wait_imported(fire.distribute(path), path, MEMORY_IMPORT_TIMEOUT_S)
        fire.check_alive("this batch")
        batches.append(len(batch))

    curated = curated_records(fire.agent_name, fire.targets)
    fire.write(r.control_sized(curated))
    fire.wait_imported(fire.distribute("/fuzz-check/curated"), "/fuzz-check/curated", 60)
    fire.check_alive(f"the hand-picked records {curated!r}")
    fuzz()
    assert len(batches) >= MEMORY_EXAMPLES // 2, f"only {len(batches)} batches were fired"


@pytest.fixture(
    params=["sqlite", pytest.param("kafka")],
)
def spark_fire(
    request: pytest.FixtureRequest, spark: Any, tmp_path: Path, unique_name: str
) -> Iterator[SubscribersUnderFire]:
    kafka: KafkaService | None = (
        request.getfixturevalue("kafka_service") if request.param == "kafka" else None
    )
    fire = SubscribersUnderFire.start(
        tmp_path, unique_name, kafka, lambda path: DeltaStore(spark, path)
    )
    yield fire
    fire.close()


@pytest.mark.integration
@pytest.mark.slow
def test_spark_subscribers_import_a_valid_package_after_garbage(
    spark_fire: SubscribersUnderFire,
) -> None:
    fire = spark_fire
    fire.restarts_before = fire.restart_counts()
    agents = [fire.agent_name, "other"]
    batch = curated_records(fire.agent_name, fire.targets) + r.draw_batch(
        r.garbage(agents, fire.targets, any_blob_ref=False), SPARK_RECORDS
    )
    fire.write(r.control_sized(batch))
    offset = fire.distribute("/fuzz-check/spark")
    fire.wait_imported(offset, "/fuzz-check/spark", SPARK_IMPORT_TIMEOUT_S)
    fire.check_alive(f"{len(batch)} hostile records")
