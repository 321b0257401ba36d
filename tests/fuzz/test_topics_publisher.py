"""Hostile records on every topic of a running publisher agent, on the embedded journal and on
real Kafka: Hypothesis batches (random bytes, hostile messages, mutated records, hostile event
JSON) plus hand-picked records, each batch read by the agent before the checks run.

After every batch: no agent thread died, no loop had to be restarted, /ready answers 200 and
every view (agent, subscribers, queues and their pages) answers without a 5xx, within the HTTP
timeout. Before, after the garbage and after a restart on the same topics (the new instance
reads discovery and status from the earliest record, and the new leader reads the event topic
back): a distributed package reaches a subscriber's queue and gets its distributed event.

On Kafka the garbage comes from a bare producer: header values that are not UTF-8, headers
without a value, tombstones, explicit partitions, and the leader election topic too.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

from blobstore.local import LocalBlobStore
from journal.api import Journal
from journal.factory import open_journal
from journal.settings import JournalSettings, TopicSettings
from journal.topics import topic_specs
from publisher.agent import PublisherAgent
from tests.fuzz import records as r
from tests.fuzz.curated import curated_records
from tests.fuzz.liveness import ThreadWatch
from tests.fuzz.publisher_under_fire import DISCOVERY_TTL_S, PublisherUnderFire, Writer
from tests.publisher.conftest import publisher_settings
from tests.services import KafkaService, unique_topics

pytestmark = pytest.mark.slow

# Batches per run: each is written, read by the agent (the sentinel's records tell when) and
# checked through a dozen HTTP requests, about a second per batch on SQLite, two on Kafka.
EXAMPLES = {"sqlite": 40, "kafka": 20}
# Leader election topic records (Kafka only): the election consumer must ignore them.
LEADER_RECORDS = 10


class Backend:
    """A journal with the publisher's topics, the way to write garbage on it, and agents."""

    def __init__(self, name: str, tmp: Path, kafka: KafkaService | None, prefix: str) -> None:
        self.name = name
        self.tmp = tmp
        topics = TopicSettings.model_validate(unique_topics(prefix))
        if kafka is None:
            self.js = JournalSettings(
                backend="sqlite", sqlite_path=tmp / "journal.db", topics=topics
            )
        else:
            self.js = JournalSettings(
                backend="kafka", bootstrap_servers=kafka.bootstrap, topics=topics
            )
        self.journal: Journal = open_journal(self.js)
        self.journal.create_topics(topic_specs(self.js))
        self.blobs = LocalBlobStore(tmp / "blobs")
        self.agent_name = "publish" if kafka is None else f"fuzz-{prefix}"
        self.leader_topic = f"{prefix}.leader"
        self.names = r.topic_names(topics, leader=self.leader_topic)
        counts = {spec.name: spec.partitions for spec in topic_specs(self.js)}
        self.partitions = {kind: counts.get(name, 1) for kind, name in self.names.items()}
        self.kafka = kafka

    def write(self, batch: Sequence[r.Garbage]) -> object:
        if self.kafka is None:
            return r.send_records(self.journal, self.names, batch)
        return r.produce_raw(self.kafka.bootstrap, self.names, batch, self.partitions)

    def start_agent(self, instance_id: str) -> tuple[PublisherAgent, ThreadWatch]:
        watch = ThreadWatch()
        settings = publisher_settings(
            agent_name=self.agent_name,
            instance_id=instance_id,
            leader_topic=self.leader_topic,
            discovery_ttl_s=DISCOVERY_TTL_S,
        )
        agent = PublisherAgent(settings, self.js, self.journal, self.blobs).start()
        watch.started()
        return agent, watch


@pytest.fixture(
    params=["sqlite", pytest.param("kafka", marks=[pytest.mark.integration, pytest.mark.slow])]
)
def backend(request: pytest.FixtureRequest, tmp_path: Path, unique_name: str) -> Iterator[Backend]:
    kafka: KafkaService | None = (
        request.getfixturevalue("kafka_service") if request.param == "kafka" else None
    )
    backend = Backend(request.param, tmp_path, kafka, unique_name)
    yield backend
    backend.journal.close()


def _under_fire(backend: Backend, instance_id: str) -> PublisherUnderFire:
    agent, watch = backend.start_agent(instance_id)
    writer: Writer = backend.write
    return PublisherUnderFire(agent, backend.journal, backend.js.topics, writer, watch)


def _stop(fire: PublisherUnderFire) -> None:
    fire.close()
    fire.agent.stop()


def test_the_publisher_reads_hostile_records_on_every_topic(backend: Backend) -> None:
    agents = [backend.agent_name, "other"]
    fire = _under_fire(backend, "pub-1")
    try:
        fire.check_package_flows("/fuzz-check/before")
        fire.restarts_before = fire.restart_counts()

        curated = curated_records(backend.agent_name)
        if backend.kafka is not None:
            curated += r.draw_batch(r.random_records("leader"), LEADER_RECORDS)
        fire.fire(r.control_sized(curated))
        fire.check_alive(f"the hand-picked records {curated!r}")

        @settings(
            max_examples=EXAMPLES[backend.name],
            derandomize=True,
            database=None,
            deadline=None,
            # The agent keeps the state of every batch before: shrinking would replay batches
            # against a different agent state; the failing batch is reported as generated.
            phases=[Phase.generate],
            report_multiple_bugs=False,
            suppress_health_check=list(HealthCheck),
        )
        @given(batch=st.lists(r.garbage(agents), min_size=1, max_size=6))
        def fuzz(batch: list[r.Garbage]) -> None:
            note(repr(batch))
            fire.fire(r.control_sized(batch))
            fire.check_alive("this batch")
            fired.append(len(batch))

        fired: list[int] = []
        fuzz()
        assert len(fired) >= EXAMPLES[backend.name] // 2, f"only {len(fired)} batches were fired"
        print(f"fired {len(fired)} batches, {sum(fired)} records")
        fire.check_package_flows("/fuzz-check/after")
    finally:
        _stop(fire)

    # A new instance reads every hostile discovery and status record from the earliest one,
    # and its leader reads the hostile event records back.
    restarted = _under_fire(backend, "pub-2")
    try:
        restarted.restarts_before = restarted.restart_counts()
        restarted.check_package_flows("/fuzz-check/restarted")
        restarted.check_alive("a restart over the garbage")
    finally:
        _stop(restarted)
