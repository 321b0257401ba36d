"""Session-wide access to real infrastructure; how it is obtained lives in tests/services.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests import services
from tests.services import KafkaService, S3Service


@pytest.fixture(scope="session")
def kafka_service() -> Iterator[KafkaService]:
    with services.provide_kafka() as service:
        yield service


@pytest.fixture(scope="session")
def s3_service() -> Iterator[S3Service]:
    with services.provide_s3() as service:
        yield service


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> str:
    """A short name for topics and buckets, unique to this test run."""
    return services.unique_name(request.node.name)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one local SparkSession of the test run (Delta Lake and s3a available)."""
    with services.local_spark() as session:
        yield session
