"""Two regions with real components: Kafka clusters A and B (deploy/kafka.sh), MirrorMaker 2
(deploy/mirrormaker.sh) copying the package and command topics A->B and the status and
discovery topics B->A under its default renamed topics, a lagging blob replicator between two
buckets of the S3 server, and a subscriber (Spark, Delta) that fails over from A to B. One
module: the clusters and MirrorMaker are started once."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient

from blobstore.factory import open_blob_store
from journal.api import Position, Record, TopicSpec
from journal.kafka.journal import KafkaJournal
from journal.settings import JournalSettings, TopicSettings
from journal.wire import messages as m
from publisher.agent import PublisherAgent
from publisher.api import create_app
from publisher.distributed_events import EVENT_TYPE, START_TYPE
from subscriber.agent import SubscriberAgent
from subscriber.store.delta import DeltaStore
from tests import services
from tests.publisher.conftest import AUTH, publisher_settings
from tests.publisher.simulate import SimulatedSubscriber
from tests.regions.mirror import (
    MIRROR_KINDS,
    MIRROR_TIMEOUT_S,
    BlobReplicator,
    Flow,
    delete_before,
    journal_settings,
    mirror_maker,
    on_a,
    on_b,
    wait_records,
)
from tests.services import KafkaService, S3Service
from tests.subscriber import harness as h
from tests.subscriber.packages import node, package
from tests.waiting import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not services.java_available(), reason="Kafka needs Java (17+)"),
]

# Records written to A's package topics and deleted (as retention would) before MirrorMaker
# starts: B's copy then starts at A's offset EARLY, so the two logs' offsets differ by EARLY.
EARLY = 3
# Event ticks run every FAST_REFRESH_S in tests: this covers several.
EVENT_SETTLE_S = 1.0
# The simulated subscribers announce this often (real ones: every 10 s).
ANNOUNCE_EVERY_S = 1.0
# The replicator's lag in the blob test: long enough to see the blob missing in B first.
BLOB_LAG_S = 3.0


@dataclass
class Regions:
    kafka_a: KafkaService
    kafka_b: KafkaService
    a: KafkaJournal
    b: KafkaJournal
    raw: dict[str, str]  # kind -> topic of the raw-record checks (the same name on A and B)
    scd: dict[str, str]  # kind -> topic of the subscriber test
    pub: dict[str, str]  # kind -> topic of the publisher test


@pytest.fixture(scope="module")
def regions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Regions]:
    workdir: Path = tmp_path_factory.mktemp("regions")
    prefix = services.unique_name("regions")
    raw, scd = services.unique_topics(f"{prefix}-raw"), services.unique_topics(f"{prefix}-scd")
    pub = services.unique_topics(f"{prefix}-pub")
    with ExitStack() as stack:
        kafka_a, kafka_b = _two_brokers(stack)
        a = stack.enter_context(KafkaJournal(kafka_a.bootstrap))
        b = stack.enter_context(KafkaJournal(kafka_b.bootstrap))
        specs = [TopicSpec(name) for name in raw.values()]
        a.create_topics(specs)
        b.create_topics(specs)
        h.create_topics(a, journal_settings(kafka_a, scd))
        h.create_topics(b, journal_settings(kafka_b, scd))
        h.create_topics(a, journal_settings(kafka_a, pub))
        h.create_topics(b, journal_settings(kafka_b, pub))
        for topic in (raw["package"], scd["package"], pub["package"]):
            for i in range(EARLY):
                a.send(topic, f"early-{i}".encode())
            delete_before(kafka_a.bootstrap, topic, EARLY)
        flows = [
            Flow("ra", "rb", [t[k] for t in (raw, scd, pub) for k in MIRROR_KINDS]),
            Flow("rb", "ra", [t[k] for t in (raw, scd, pub) for k in ("status", "discovery")]),
        ]
        clusters = {"ra": kafka_a.bootstrap, "rb": kafka_b.bootstrap}
        stack.enter_context(mirror_maker(f"mm2-{prefix}", clusters, flows, workdir))
        yield Regions(kafka_a, kafka_b, a, b, raw, scd, pub)


def _two_brokers(stack: ExitStack) -> tuple[KafkaService, KafkaService]:
    """Regions A and B, started side by side (a start is mostly JVM warm-up and waiting)."""
    managers = [services.own_native_kafka(hint) for hint in ("region-a", "region-b")]
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(manager.__enter__) for manager in managers]
    for manager, future in zip(managers, futures, strict=True):
        if future.exception() is None:
            stack.push(manager.__exit__)  # stopped however the other start went
    a, b = (future.result()[0] for future in futures)
    return a, b


def _read_until(journal: KafkaJournal, topic: str, count: int) -> list[Record]:
    """The first ``count`` records of ``topic``, waiting for the topic and its records."""
    wait_records(journal, topic, count)
    deadline = time.monotonic() + MIRROR_TIMEOUT_S
    records: list[Record] = []
    with journal.consumer(topic, Position.earliest()) as consumer:
        while len(records) < count:
            assert time.monotonic() < deadline, f"{topic}: reading {count} records timed out"
            records += consumer.poll(1.0)
    return records[:count]


def test_package_and_command_topics_reach_b_under_other_offsets(regions: Regions) -> None:
    values = [f"package-{i}".encode() for i in range(5)]
    offsets_a = [regions.a.send(regions.raw["package"], v, key=b"k") for v in values]
    regions.a.send(regions.raw["command"], b"clear")

    copied = _read_until(regions.b, on_b(regions.raw["package"]), len(values))
    commands = _read_until(regions.b, on_b(regions.raw["command"]), 1)

    assert [r.value for r in copied] == values
    assert [r.key for r in copied] == [b"k"] * len(values)
    assert offsets_a == list(range(EARLY, EARLY + len(values)))
    assert [r.offset for r in copied] == list(range(len(values)))
    assert [r.value for r in commands] == [b"clear"]
    # B's own topic of that name is untouched: only the renamed copy receives A's records.
    assert regions.b.latest_offset(regions.raw["package"]) == 0


def test_status_and_discovery_of_b_reach_a(regions: Regions) -> None:
    regions.b.send(regions.raw["discovery"], b"announce-b")
    regions.b.send(regions.raw["status"], b"status-b")

    discovery = _read_until(regions.a, on_a(regions.raw["discovery"]), 1)
    status = _read_until(regions.a, on_a(regions.raw["status"]), 1)
    assert [r.value for r in discovery] == [b"announce-b"]
    assert [r.value for r in status] == [b"status-b"]


def test_blob_reaches_b_only_after_the_lag(s3_service: S3Service, unique_name: str) -> None:
    client = services.s3_client(s3_service)
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


def _agent(
    spark: Any, journal: KafkaJournal, js: JournalSettings, s3: S3Service, bucket: str, store: Path
) -> SubscriberAgent:
    bs = h.blob_settings(s3, bucket, store.parent)
    settings = h.subscriber_settings(js, bs, store)
    agent = SubscriberAgent(settings, journal, DeltaStore(spark, str(store)), open_blob_store(bs))
    agent.open()
    return agent


def _paths(agent: SubscriberAgent) -> set[str]:
    return {n.path for n in agent.store.nodes() if n.path.startswith("/r/")}


def test_a_subscriber_and_a_clone_of_its_store_fail_over_to_b_by_sequence(
    regions: Regions, s3_service: S3Service, spark: Any, unique_name: str, tmp_path: Path
) -> None:
    """A subscriber imports half a stream from A, stops; it is restarted on B's mirror (only
    its journal and bucket settings change) and a copy of its store seeds a second one on B.
    Both import every package once, the last one, spilled, after its blob reached B's bucket."""
    bucket_a, bucket_b = f"{unique_name}-a", f"{unique_name}-b"
    js_a = journal_settings(regions.kafka_a, regions.scd)
    js_b = journal_settings(regions.kafka_b, regions.scd, mirrored=True)
    blobs_a = open_blob_store(h.blob_settings(s3_service, bucket_a, tmp_path))
    services.s3_client(s3_service).create_bucket(Bucket=bucket_b)
    pages = [f"/r/page-{n}" for n in range(1, 7)]

    def send(n: int, spilled: bool = False) -> int:
        pkg = package(f"p{n}", m.ReqType.ADD, [(pages[n - 1], True)], [node(pages[n - 1], n=n)])
        return h.send_package(regions.a, js_a, pkg, blobs=blobs_a if spilled else None, sequence=n)

    store = tmp_path / "store"
    offsets = [send(n) for n in (1, 2, 3)]
    assert offsets == [EARLY, EARLY + 1, EARLY + 2]  # on B: 0, 1, 2
    in_a = _agent(spark, regions.a, js_a, s3_service, bucket_a, store)
    h.drive(in_a, lambda: in_a.processed_offset == offsets[-1])
    assert _paths(in_a) == set(pages[:3])
    in_a.stop()
    clone = tmp_path / "clone"
    shutil.copytree(store, clone)

    def fail_over(path: Path, replicator: BlobReplicator) -> None:
        in_b = _agent(spark, regions.b, js_b, s3_service, bucket_b, path).start()
        last = regions.b.latest_offset(mirrored) - 1
        try:
            if not replicator.copied:
                # The spilled package is reached before its blob: retried, never skipped.
                wait_for(lambda: in_b.retries > 0, 180, "a retry of the package without blob")
                assert in_b.processed_offset == last - 1
                replicator.lag_s = 0
            wait_for(lambda: in_b.processed_offset == last, 180, "the last package imported")
        finally:
            in_b.stop()
        assert _paths(in_b) == set(pages)
        state = in_b.store.state
        assert state is not None
        assert state.sequences == {h.PUB: 6}
        # 4, 5, 6 imported once each; 1..3, read again on B, skipped as applied.
        assert in_b.counters.imported == 3
        assert in_b.loop.sequences.replays == 3

    client = services.s3_client(s3_service)
    mirrored = on_b(regions.scd["package"])
    # The blob stays in A until the subscriber on B has tried the package at least once.
    with BlobReplicator(client, bucket_a, bucket_b, lag_s=3600) as replicator:
        offsets += [send(4), send(5), send(6, spilled=True)]
        wait_records(regions.b, mirrored, 6)
        fail_over(store, replicator)
        fail_over(clone, replicator)
        assert replicator.copied == {"packages/p6"}


def test_the_publisher_places_a_subscriber_of_b_by_sequence_in_its_own_offsets(
    regions: Regions, s3_service: S3Service, unique_name: str, tmp_path: Path
) -> None:
    """A publisher in A reads its own discovery and status topics and B's copies of them
    (``rb.``). A subscriber on B's mirror of the package topic (offsets EARLY lower than A's)
    announces its B offset and its sequence number; its queue at the publisher is the queue of
    a subscriber on A at the same number, in A's offsets, and its failure lands on A's offset."""
    js_a = journal_settings(regions.kafka_a, regions.pub)
    settings = publisher_settings(
        agent_name=unique_name,
        leader_topic=f"{unique_name}.leader",
        package_key_prefix=f"packages-{unique_name}",
        remote_topic_prefixes=[on_a("")],
    )
    blobs = open_blob_store(h.blob_settings(s3_service, unique_name, tmp_path))
    agent = PublisherAgent(settings, js_a, regions.a, blobs).start()
    stop = threading.Event()  # the simulated subscribers' announcements
    try:
        client = TestClient(create_app(agent), headers=AUTH)
        offsets = []  # on A, of the six packages
        for i in range(6):
            r = client.post("/distribute", json={"action": "DELETE", "paths": [f"/r/p{i}"]})
            assert r.status_code == 200, r.text
            offsets.append(r.json()["offset"])
        # After the EARLY records; each batch's transaction marker takes an offset on A.
        assert offsets[0] == EARLY
        assert offsets == sorted(set(offsets))
        copied = _read_until(regions.b, on_b(regions.pub["package"]), 6)
        # The numbers continue above the EARLY records the log held (journal/sequence.py).
        numbers = [cast(m.PackageMessage, m.decode(r.headers, r.value)).sequence for r in copied]
        assert numbers == list(range(numbers[0], numbers[0] + 6))
        # The copy holds the records only: its offsets differ from A's, as numbers do not.
        on_b_copy = [r.offset for r in copied]
        assert on_b_copy == list(range(6))
        topics_b = TopicSettings.model_validate(regions.pub)
        remote = SimulatedSubscriber(regions.b, topics_b, "in-b", pub_agent_name=unique_name)
        local = SimulatedSubscriber(
            regions.a, TopicSettings.model_validate(regions.pub), "in-a", pub_agent_name=unique_name
        )
        at = {"n": 1}  # both subscribers' position: the index of the last package applied

        def announce() -> None:
            # As subscribers do (every 10 s there): alive past the discovery TTL however slow
            # the event writer's first start is on a fresh broker.
            while True:
                remote.announce(on_b_copy[at["n"]], sequence=numbers[at["n"]])
                local.announce(offsets[at["n"]])
                if stop.wait(ANNOUNCE_EVERY_S):
                    return

        announcer = threading.Thread(target=announce, name="announcer", daemon=True)
        announcer.start()
        remote.failed(on_b_copy[3], sequence=numbers[3])

        def queues() -> dict[str, dict[str, Any]] | None:
            found = {q["name"]: q for q in client.get("/queues").json()}
            wanted = (remote.queue_name, local.queue_name)
            ready = all(n in found for n in wanted) and found[remote.queue_name]["errorQueueSize"]
            return found if ready else None

        found = wait_for(queues, MIRROR_TIMEOUT_S, "both subscribers' queues at the publisher")
        b, a = found[remote.queue_name], found[local.queue_name]
        for key in ("size", "headOffset", "processedOffset", "state"):
            assert b[key] == a[key], key
        assert (b["size"], b["headOffset"], b["processedOffset"]) == (4, offsets[2], offsets[1])
        errors = client.get(f"/queues/{remote.queue_name}/errors").json()
        assert [item["offset"] for item in errors["items"]] == [offsets[3]]
        subscribers = {s["queueName"]: s for s in client.get("/subscribers").json()}
        assert subscribers[remote.queue_name]["remote"] is True
        # A clear of the remote queue reaches B carrying the package's number, which the
        # subscriber obeys (its offsets on B are EARLY lower than the command's offset).
        r = client.post(f"/queues/{remote.queue_name}/clear", json={"mode": "head"})
        assert r.status_code == 200, r.text
        assert r.json()["clearOffset"] == offsets[2]
        (command,) = _read_until(regions.b, on_b(regions.pub["command"]), 1)
        clear = cast(m.CommandMessage, m.decode(command.headers, command.value))
        assert (clear.sub_agent_name, clear.sub_sling_id) == (remote.agent_name, remote.sling_id)
        assert (clear.clear_command.offset, clear.clear_command.sequence) == (
            offsets[2],
            numbers[2],
        )
        assert subscribers[local.queue_name]["remote"] is False

        # Events start after where both are (the leader's first tick records it); at the end,
        # one event per package after it, none for B's copy.
        event_topic = regions.pub["event"]
        assert _events(regions.a, event_topic, 1, START_TYPE, "startAfter") == [offsets[1]]
        at["n"] = 5
        assert _events(regions.a, event_topic, 4) == offsets[2:]
        time.sleep(EVENT_SETTLE_S)  # several event ticks more: nothing else is sent
        assert _events(regions.a, event_topic, 4) == offsets[2:]
    finally:
        stop.set()
        agent.stop()
        blobs.close()


def _events(
    journal: KafkaJournal,
    topic: str,
    at_least: int,
    type_name: str = EVENT_TYPE,
    field: str = "offset",
) -> list[int]:
    """The offsets the records of ``type_name`` on the event topic name (``field``), in order:
    read until there are ``at_least`` and a poll finds nothing more."""
    deadline = time.monotonic() + MIRROR_TIMEOUT_S
    out: list[int] = []
    with journal.consumer(topic, Position.earliest()) as consumer:
        while True:
            records = consumer.poll(0.5)
            out += [
                json.loads(r.value)[field]
                for r in records
                if r.headers.get(m.TYPE_HEADER) == type_name
            ]
            if not records and len(out) >= at_least:
                return out
            assert time.monotonic() < deadline, f"{topic}: {len(out)} events, not {at_least}"
