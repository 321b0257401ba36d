"""Spilled packages on the real S3 server, the blob cleanup against real retention, and a
journal outage (Sling scenario 10) on the real broker."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from blobstore.s3 import S3BlobStore
from journal.api import Position
from journal.content.package import checksum, decode_package
from journal.kafka.journal import KafkaJournal
from journal.settings import JournalSettings
from journal.wire.messages import PackageMessage, decode
from publisher.api import create_app
from publisher.distribute.spill import OFFSET_METADATA
from tests.blobstore.reading import read_blob
from tests.publisher.conftest import AUTH
from tests.publisher.integration.conftest import KafkaAgentFactory, journal_settings_for
from tests.services import KafkaService
from tests.waiting import wait_for


@pytest.fixture(scope="module")
def kafka_service(own_kafka: KafkaService) -> KafkaService:
    """A test here stops the broker: this module's own, not the shared one."""
    return own_kafka


pytestmark = pytest.mark.integration

KIB = 1024
MB = 1000 * 1000


def package_messages(journal: KafkaJournal, topic: str) -> list[PackageMessage]:
    out: list[PackageMessage] = []
    with journal.consumer(topic, Position.earliest()) as consumer:
        while batch := consumer.poll(1.0):
            out.extend(decode(r.headers, r.value) for r in batch)  # type: ignore[misc]
    return out


def write_tree(root: Path, files: int, size: int) -> None:
    for i in range(files):
        folder = root / f"section-{i % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"page-{i}.bin").write_bytes(os.urandom(size))


def test_5mb_tree_distributes_as_one_spilled_package(
    make_kafka_agent: KafkaAgentFactory,
    kafka_journal: KafkaJournal,
    blobs: S3BlobStore,
    tmp_path: Path,
) -> None:
    write_tree(tmp_path / "tree", files=500, size=10 * 1000)  # 5 MB, every file inline
    agent = make_kafka_agent()
    client = TestClient(create_app(agent), headers=AUTH)
    response = client.post("/distribute", json={"action": "ADD", "deepPaths": ["/tree"]})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["spilled"] is True
    assert body["size"] > 5 * MB
    assert body["nodeCount"] == 511
    (message,) = package_messages(kafka_journal, agent.topics.package)
    assert message.pkg_binary_ref == body["blobKey"]
    assert message.pkg_binary == b""
    stored = read_blob(blobs, message.pkg_binary_ref)
    assert checksum(stored) == message.checksum
    assert len(stored) == message.pkg_length
    assert blobs.head(message.pkg_binary_ref).metadata[OFFSET_METADATA] == str(body["offset"])
    package = decode_package(stored)
    assert len(package.nodes) == 511
    assert package.package_id == message.pkg_id


def test_900kb_file_with_a_high_binary_threshold_spills_the_package(
    make_kafka_agent: KafkaAgentFactory,
    kafka_journal: KafkaJournal,
    blobs: S3BlobStore,
    tmp_path: Path,
) -> None:
    (tmp_path / "file.bin").write_bytes(os.urandom(900 * 1000))
    agent = make_kafka_agent(binary_threshold_bytes=10 * MB)
    client = TestClient(create_app(agent), headers=AUTH)
    body = client.post("/distribute", json={"action": "ADD", "paths": ["/file.bin"]}).json()
    assert body["spilled"] is True
    assert body["binariesReferenced"] == 0
    (message,) = package_messages(kafka_journal, agent.topics.package)
    node = decode_package(read_blob(blobs, message.pkg_binary_ref)).nodes[0]
    assert node.properties["jcr:data"].binary_value.inline == (tmp_path / "file.bin").read_bytes()


@pytest.mark.usefixtures("blobs")
def test_package_over_the_maximum_is_refused_with_413(
    make_kafka_agent: KafkaAgentFactory, kafka_journal: KafkaJournal, tmp_path: Path
) -> None:
    write_tree(tmp_path / "tree", files=300, size=10 * 1000)
    agent = make_kafka_agent(max_package_bytes=2 * MB)
    client = TestClient(create_app(agent), headers=AUTH)
    response = client.post("/distribute", json={"action": "ADD", "deepPaths": ["/tree"]})
    assert response.status_code == 413
    assert response.json()["limit"] == 2 * MB
    assert response.json()["size"] > 2 * MB
    assert package_messages(kafka_journal, agent.topics.package) == []


# Retention of the package topic in the cleanup test: Kafka deletes a closed segment once its
# newest record is older than this (checked every 5 s by the test broker).
SHORT_RETENTION_MS = 4000


def test_cleanup_deletes_below_earliest_keeps_recent_and_stamps_orphans(
    make_kafka_agent: KafkaAgentFactory,
    kafka_service: KafkaService,
    kafka_journal: KafkaJournal,
    blobs: S3BlobStore,
    unique_name: str,
) -> None:
    settings: JournalSettings = journal_settings_for(
        kafka_service, unique_name, package_retention_ms=SHORT_RETENTION_MS
    )
    agent = make_kafka_agent(
        journal_settings=settings, inline_package_limit_bytes=1, cleanup_grace_s=3600
    )
    client = TestClient(create_app(agent), headers=AUTH)

    def spilled(name: str) -> dict[str, Any]:
        body: dict[str, Any] = client.post(
            "/distribute",
            json={"action": "ADD", "paths": [f"/{name}"], "nodes": [{"path": f"/{name}"}]},
        ).json()
        assert body["spilled"] is True
        return body

    old = [spilled("old-1"), spilled("old-2")]
    time.sleep(SHORT_RETENTION_MS / 1000 + 1)
    rolls = spilled("rolls-the-segment")
    topic = settings.topics.package
    wait_for(
        lambda: kafka_journal.earliest_offset(topic) > old[-1]["offset"],
        90,
        "retention to delete the old packages",
    )
    recent = spilled("recent")
    orphan = agent.spill.store("orphan-of-a-failed-send", b"bytes", "0" * 64)
    agent.cleanup.grace_s = 0

    result = client.post("/cleanup").json()
    assert result["earliestOffset"] > old[-1]["offset"]
    for body in old:
        assert not blobs.exists(body["blobKey"])
    assert blobs.head(recent["blobKey"]).metadata[OFFSET_METADATA] == str(recent["offset"])
    assert blobs.head(orphan).metadata[OFFSET_METADATA] == str(result["latestOffset"])
    # The segment-rolling package may have expired meanwhile too: the rule decides.
    rolled_gone = rolls["offset"] < result["earliestOffset"]
    assert blobs.exists(rolls["blobKey"]) is not rolled_gone
    assert result["deleted"] == 2 + rolled_gone
    assert result["stamped"] == 1


@pytest.mark.slow
def test_scenario_10_journal_outage_fails_clearly_then_recovers(
    make_kafka_agent: KafkaAgentFactory,
    kafka_service: KafkaService,
    kafka_journal: KafkaJournal,
    blobs: S3BlobStore,
) -> None:
    agent = make_kafka_agent(inline_package_limit_bytes=1, cleanup_grace_s=3600)
    client = TestClient(create_app(agent), headers=AUTH)
    body = {"action": "ADD", "paths": ["/a"], "nodes": [{"path": "/a", "properties": {"x": 1}}]}
    assert client.post("/distribute", json=body).status_code == 200
    kafka_service.stop()
    try:
        started = time.monotonic()
        response = client.post("/distribute", json=body)
        elapsed = time.monotonic() - started
        assert response.status_code == 503, response.text
        assert "Kafka" in response.json()["detail"]
        assert response.headers["retry-after"]
        assert elapsed < 30
        assert client.get("/ready").status_code == 503
    finally:
        kafka_service.start()
    ok = wait_for(lambda: (r := client.post("/distribute", json=body)).status_code == 200 and r, 60)
    messages = package_messages(kafka_journal, agent.topics.package)
    assert [m.pkg_id for m in messages][-1] == ok.json()["packageId"]
    assert len(messages) == 2  # the refused request wrote nothing to the log
    unstamped = [
        b for b in blobs.list(f"{agent.spill.prefix}/") if OFFSET_METADATA not in b.metadata
    ]
    assert len(unstamped) == 1  # its blob waits for the cleanup to stamp it
    agent.cleanup.grace_s = 0
    assert agent.run_cleanup().stamped == 1
