"""Two regions with real components: Kafka clusters A and B (deploy/kafka.sh), MirrorMaker 2
(deploy/mirrormaker.sh) copying the package and command topics A->B and the status and
discovery topics B->A under its default renamed topics, and a lagging blob replicator between
two buckets of the S3 server. One module: the clusters and MirrorMaker are started once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from journal.api import Position, Record, TopicSpec
from journal.kafka.journal import KafkaJournal
from tests import services
from tests.regions.mirror import BlobReplicator, Flow, mirror_maker, s3_client
from tests.services import S3Service

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not services.java_available(), reason="Kafka needs Java (17+)"),
]

# Records written to A's package topic and deleted (as retention would) before MirrorMaker
# starts: B's copy then starts at A's offset EARLY, so the two logs' offsets differ by EARLY.
EARLY = 3
# MirrorMaker picks up new topics within its refresh interval and copies within a second or
# two; 90 s covers a loaded 2-core machine.
MIRROR_TIMEOUT_S = 90.0
# The replicator's lag in the blob test: long enough to see the blob missing in B first.
BLOB_LAG_S = 2.0


@dataclass
class Regions:
    a: KafkaJournal
    b: KafkaJournal
    alias_a: str
    alias_b: str
    topics: dict[str, str]  # kind -> topic name (the same on both clusters)

    def mirrored_on_b(self, kind: str) -> str:
        """The name of A's topic ``kind`` on B (MirrorMaker's default policy)."""
        return f"{self.alias_a}.{self.topics[kind]}"

    def mirrored_on_a(self, kind: str) -> str:
        return f"{self.alias_b}.{self.topics[kind]}"


@pytest.fixture(scope="module")
def regions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Regions]:
    workdir: Path = tmp_path_factory.mktemp("regions")
    prefix = services.unique_name("regions")
    topics = services.unique_topics(prefix)
    with ExitStack() as stack:
        (kafka_a, _), (kafka_b, _) = (
            stack.enter_context(services.own_native_kafka("region-a")),
            stack.enter_context(services.own_native_kafka("region-b")),
        )
        a = stack.enter_context(KafkaJournal(kafka_a.bootstrap))
        b = stack.enter_context(KafkaJournal(kafka_b.bootstrap))
        specs = [TopicSpec(name) for name in topics.values()]
        a.create_topics(specs)
        b.create_topics(specs)
        for i in range(EARLY):
            a.send(topics["package"], f"early-{i}".encode())
        _delete_before(kafka_a.bootstrap, topics["package"], EARLY)
        regions = Regions(a, b, "ra", "rb", topics)
        flows = [
            Flow("ra", "rb", [topics["package"], topics["command"]]),
            Flow("rb", "ra", [topics["status"], topics["discovery"]]),
        ]
        clusters = {"ra": kafka_a.bootstrap, "rb": kafka_b.bootstrap}
        stack.enter_context(mirror_maker(f"mm2-{prefix}", clusters, flows, workdir))
        yield regions


def _delete_before(bootstrap: str, topic: str, offset: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, offset)]).values():
        future.result(timeout=30)


def _read_until(journal: KafkaJournal, topic: str, count: int) -> list[Record]:
    """The first ``count`` records of ``topic``, waiting for the topic and its records."""
    deadline = time.monotonic() + MIRROR_TIMEOUT_S
    while True:
        try:
            if journal.latest_offset(topic) - journal.earliest_offset(topic) >= count:
                break
        except Exception:  # the topic does not exist yet: MirrorMaker creates it
            pass
        assert time.monotonic() < deadline, f"{topic}: fewer than {count} records in time"
        time.sleep(0.2)
    records: list[Record] = []
    with journal.consumer(topic, Position.earliest()) as consumer:
        while len(records) < count:
            assert time.monotonic() < deadline, f"{topic}: reading {count} records timed out"
            records += consumer.poll(1.0)
    return records[:count]


def test_package_and_command_topics_reach_b_under_other_offsets(regions: Regions) -> None:
    values = [f"package-{i}".encode() for i in range(5)]
    offsets_a = [regions.a.send(regions.topics["package"], v, key=b"k") for v in values]
    regions.a.send(regions.topics["command"], b"clear")

    copied = _read_until(regions.b, regions.mirrored_on_b("package"), len(values))
    commands = _read_until(regions.b, regions.mirrored_on_b("command"), 1)

    assert [r.value for r in copied] == values
    assert [r.key for r in copied] == [b"k"] * len(values)
    assert offsets_a == list(range(EARLY, EARLY + len(values)))
    assert [r.offset for r in copied] == list(range(len(values)))
    assert [r.value for r in commands] == [b"clear"]
    # B's own topic of that name is untouched: only the renamed copy receives A's records.
    assert regions.b.latest_offset(regions.topics["package"]) == 0


def test_status_and_discovery_of_b_reach_a(regions: Regions) -> None:
    regions.b.send(regions.topics["discovery"], b"announce-b")
    regions.b.send(regions.topics["status"], b"status-b")

    assert [r.value for r in _read_until(regions.a, regions.mirrored_on_a("discovery"), 1)] == [
        b"announce-b"
    ]
    assert [r.value for r in _read_until(regions.a, regions.mirrored_on_a("status"), 1)] == [
        b"status-b"
    ]


def test_blob_reaches_b_only_after_the_lag(s3_service: S3Service, unique_name: str) -> None:
    client = s3_client(s3_service)
    source, target = f"{unique_name}-a", f"{unique_name}-b"
    for bucket in (source, target):
        client.create_bucket(Bucket=bucket)
    with BlobReplicator(client, source, target, lag_s=BLOB_LAG_S) as replicator:
        client.put_object(Bucket=source, Key="blobs/x", Body=b"payload")
        written = time.monotonic()
        time.sleep(BLOB_LAG_S / 2)
        assert "Contents" not in client.list_objects_v2(Bucket=target)
        deadline = written + BLOB_LAG_S + 30
        while "blobs/x" not in replicator.copied:
            assert time.monotonic() < deadline, "the blob was not replicated in time"
            time.sleep(0.1)
    assert time.monotonic() - written >= BLOB_LAG_S
    assert client.get_object(Bucket=target, Key="blobs/x")["Body"].read() == b"payload"
