"""Fixtures of the subscriber suites that run against the real services."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from blobstore.factory import open_blob_store
from journal.factory import open_journal
from tests.services import KafkaService, S3Service
from tests.subscriber import harness as h


@pytest.fixture
def env(
    kafka_service: KafkaService, s3_service: S3Service, unique_name: str, tmp_path: Path
) -> Iterator[h.Env]:
    js = h.journal_settings(kafka_service, unique_name, tmp_path)
    bs = h.blob_settings(s3_service, unique_name, tmp_path)
    with open_journal(js) as journal, open_blob_store(bs) as blobs:
        h.create_topics(journal, js)
        yield h.Env(journal, js, blobs, bs, tmp_path)


@pytest.fixture
def local_env(unique_name: str, tmp_path: Path) -> Iterator[h.Env]:
    """The embedded journal (SQLite) and a local blob store: no services, no Spark."""
    js = h.journal_settings(None, unique_name, tmp_path)
    bs = h.blob_settings(None, unique_name, tmp_path)
    with open_journal(js) as journal, open_blob_store(bs) as blobs:
        h.create_topics(journal, js)
        yield h.Env(journal, js, blobs, bs, tmp_path)
