"""Publisher fixtures on the real Kafka broker and the real S3 server.

Every test gets its own topics (unique names), its own agent name (so its own leader group),
and shares one bucket per module; nothing collides with other suites on the same servers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from blobstore import BlobStoreSettings, open_blob_store
from blobstore.s3 import S3BlobStore
from journal.kafka.journal import KafkaJournal
from journal.settings import JournalSettings, TopicSettings
from publisher.agent import PublisherAgent
from publisher.api import create_app
from tests import services
from tests.publisher.conftest import AUTH, publisher_settings
from tests.services import KafkaService, S3Service

# Send timeout on the real broker: short enough that the outage test answers quickly, ample
# for a healthy broker on a loaded 2-core machine.
SEND_TIMEOUT_S = 10.0


def journal_settings_for(kafka: KafkaService, prefix: str, **overrides: Any) -> JournalSettings:
    topics = TopicSettings(
        package=f"{prefix}.package",
        status=f"{prefix}.status",
        discovery=f"{prefix}.discovery",
        command=f"{prefix}.command",
        event=f"{prefix}.event",
        **overrides,
    )
    return JournalSettings(
        backend="kafka",
        bootstrap_servers=kafka.bootstrap,
        send_timeout_s=SEND_TIMEOUT_S,
        topics=topics,
    )


def blob_settings_for(s3: S3Service, bucket: str) -> BlobStoreSettings:
    return BlobStoreSettings(
        backend="s3",
        endpoint_url=s3.endpoint_url,
        region=s3.region,
        access_key=s3.access_key,
        secret_key=s3.secret_key,  # type: ignore[arg-type]
        bucket=bucket,
        create_bucket=True,
    )


@pytest.fixture(scope="module")
def bucket(s3_service: S3Service) -> Iterator[str]:
    name = services.unique_name("publisher")
    store = open_blob_store(blob_settings_for(s3_service, name))
    yield name
    assert isinstance(store, S3BlobStore)
    for info in list(store.list()):
        store.delete(info.key)
    store.client.delete_bucket(Bucket=name)
    store.close()


@pytest.fixture
def blobs(s3_service: S3Service, bucket: str) -> Iterator[S3BlobStore]:
    store = open_blob_store(blob_settings_for(s3_service, bucket))
    assert isinstance(store, S3BlobStore)
    yield store
    store.close()


@pytest.fixture
def kafka_settings(kafka_service: KafkaService, unique_name: str) -> JournalSettings:
    return journal_settings_for(kafka_service, unique_name)


@pytest.fixture
def kafka_journal(kafka_settings: JournalSettings) -> Iterator[KafkaJournal]:
    journal = KafkaJournal(
        kafka_settings.bootstrap_servers, send_timeout_s=kafka_settings.send_timeout_s
    )
    yield journal
    journal.close()


KafkaAgentFactory = Callable[..., PublisherAgent]


@pytest.fixture
def make_kafka_agent(
    kafka_settings: JournalSettings,
    kafka_journal: KafkaJournal,
    blobs: S3BlobStore,
    unique_name: str,
    tmp_path: Path,
) -> Iterator[KafkaAgentFactory]:
    agents: list[PublisherAgent] = []

    def make(journal_settings: JournalSettings | None = None, **overrides: Any) -> PublisherAgent:
        values: dict[str, Any] = {
            "agent_name": unique_name,
            "leader_topic": f"{unique_name}.leader",
            # The bucket is shared by the module: each test cleans only its own packages.
            "package_key_prefix": f"packages-{unique_name}",
            "content_root": tmp_path,
            **overrides,
        }
        agent = PublisherAgent(
            publisher_settings(**values),
            journal_settings or kafka_settings,
            kafka_journal,
            blobs,
        )
        agents.append(agent)
        return agent.start()

    yield make
    for agent in agents:
        agent.stop()


@pytest.fixture
def kafka_agent(make_kafka_agent: KafkaAgentFactory) -> PublisherAgent:
    return make_kafka_agent()


@pytest.fixture
def kafka_client(kafka_agent: PublisherAgent) -> TestClient:
    return TestClient(create_app(kafka_agent), headers=AUTH)
