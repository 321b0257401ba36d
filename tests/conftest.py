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


# A module whose tests stop, start or freeze a server overrides ``kafka_service`` or
# ``s3_service`` with one of these, its own: the tests running beside it (pytest-xdist
# workers) keep the shared servers.
@pytest.fixture(scope="module")
def own_kafka(request: pytest.FixtureRequest) -> Iterator[KafkaService]:
    """A broker of this module alone, which its tests may stop and start."""
    with services.own_native_kafka(request.module.__name__.rpartition(".")[2]) as (service, _):
        yield service


@pytest.fixture(scope="module")
def own_s3(request: pytest.FixtureRequest) -> Iterator[S3Service]:
    """An S3 server of this module alone, which its tests may stop and start."""
    with services.own_native_s3(request.module.__name__.rpartition(".")[2]) as (service, _):
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
