"""The testcontainers path of tests/services.py, really taken: Kafka and the S3 server started
as containers from the images deploy/ builds on this machine, and the journal and blob store
contract suites run against them.

The session fixtures (``kafka_service``, ``s3_service``) prefer the SCD_TEST_* servers, so this
module starts its own containers whatever the session uses. It runs only where an engine
answers and the images are present (CI builds them); elsewhere it is skipped with the reason.
Nothing is pulled from an image registry.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator

import pytest

from blobstore import open_blob_store
from blobstore.s3 import S3BlobStore
from journal.api import Journal, TopicSpec
from journal.errors import JournalUnavailable
from journal.kafka.journal import KafkaJournal
from tests import services
from tests.blobstore.integration.test_blobstore_s3 import count_requests, settings_for
from tests.contract.blobstore_contract import BlobStoreContract, UploadCount
from tests.contract.journal_contract import JournalContract, NewTopic
from tests.services import KafkaService, S3Service

# "containers": CI runs it once the images are built, with the compose tests.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.containers]

_names = itertools.count()


def _skip_unless_runnable(image: str) -> None:
    reason = services.container_fallback(image)
    if reason is None:
        return
    if os.environ.get("SCD_TEST_COMPOSE") == "1":
        pytest.fail(f"SCD_TEST_COMPOSE=1 but the testcontainers path is not available: {reason}")
    pytest.skip(f"testcontainers path not available: {reason}")


@pytest.fixture(scope="module")
def kafka_container() -> Iterator[KafkaService]:
    image = services.kafka_image()
    _skip_unless_runnable(image)
    with services.kafka_container(image) as service:
        assert service.origin == "testcontainers"
        yield service


@pytest.fixture(scope="module")
def s3_container() -> Iterator[S3Service]:
    image = services.s3_image()
    _skip_unless_runnable(image)
    with services.s3_container(image) as service:
        assert service.origin == "testcontainers"
        yield service


# ---------------------------------------------------------------- the journal on the container


@pytest.fixture
def journal(kafka_container: KafkaService) -> Iterator[KafkaJournal]:
    with KafkaJournal(kafka_container.bootstrap) as j:
        yield j


@pytest.fixture
def new_topic(journal: Journal, unique_name: str) -> NewTopic:
    def make(**kwargs: int) -> str:
        name = f"{unique_name}-{next(_names)}"
        journal.create_topics([TopicSpec(name, **kwargs)])
        return name

    return make


class TestJournalOnKafkaContainer(JournalContract):
    pass


# ---------------------------------------------------------------- the blob store on the container


@pytest.fixture(scope="module")
def store(s3_container: S3Service) -> Iterator[S3BlobStore]:
    # The part sizes of the S3 suite (tests/blobstore/integration), whose memory bounds the
    # contract checks.
    settings = settings_for(s3_container, f"scd-tc-{uuid.uuid4().hex[:12]}", create_bucket=True)
    store = open_blob_store(settings)
    assert isinstance(store, S3BlobStore)
    yield store
    store.close()


@pytest.fixture
def upload_count(store: S3BlobStore) -> Iterator[UploadCount]:
    with count_requests(store, "PutObject", "CreateMultipartUpload") as count:
        yield count


class TestBlobStoreOnS3Container(BlobStoreContract):
    pass


def test_a_paused_kafka_container_fails_sends_then_comes_back(
    kafka_container: KafkaService, unique_name: str
) -> None:
    """The fault the outage tests use (pause: connections stay open, nothing answers) works on
    the container, and the broker answers again after it."""
    with KafkaJournal(kafka_container.bootstrap, send_timeout_s=5.0) as journal:
        topic = f"{unique_name}-pause"
        journal.create_topics([TopicSpec(topic)])
        first = journal.send(topic, b"before")
        kafka_container.stop()
        try:
            with pytest.raises(JournalUnavailable):
                journal.send(topic, b"during")
        finally:
            kafka_container.start()
        assert journal.send(topic, b"after") > first
