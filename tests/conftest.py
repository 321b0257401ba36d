"""Session-wide access to real infrastructure; how it is obtained lives in tests/services.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests import services
from tests.services import KafkaService, S3Service

# Every JVM the tests start (the Spark drivers of the test process and of the daemons and CLIs
# it runs, test brokers) compiles with C1 alone: a short-lived JVM on two shared cores spends
# much of its start in the C2 compiler, and a Spark driver's start and first jobs take about
# half as long without it (store open ~20 s instead of ~50 s under CI's load). Behaviour does
# not depend on the JIT. With C1 alone the JVM reserves 48 MB for compiled code, which a test
# process's Spark driver filled within minutes ("CodeCache is full. Compiler has been
# disabled": everything after ran in the bytecode interpreter); hence the usual 240 MB. The
# serial collector: a Spark driver's start, three store lives and its exit took 90-97 CPU-s
# with it against 101-103 with G1, the JDK's choice here (3 runs each, alternating; its
# concurrent threads cost more than they save for a heap of 512 MiB-1 GiB on 2 cores). A
# value the caller set wins.
os.environ.setdefault(
    "JAVA_TOOL_OPTIONS",
    "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC",
)

# Modules that take minutes on CI's 2-core machine, longest first (measured with pytest's
# --durations). On several workers (CI: pytest-xdist, a module per worker, in collection order)
# they start first, so none of them is left running alone at the end; the rest keep their order.
LONGEST_MODULES = (
    "tests/e2e/test_cluster.py",
    "tests/e2e/test_hundred.py",
    "tests/subscriber/integration/test_crash.py",
    "tests/subscriber/integration/test_single_writer.py",
    "tests/subscriber/integration/test_cli_content.py",
    "tests/deploy/test_cluster.py",
    "tests/subscriber/integration/test_agent.py",
    "tests/subscriber/integration/test_current_tree.py",
    "tests/e2e/test_operator_features.py",
    "tests/regions/test_regions.py",
    "tests/subscriber/integration/test_delta_store_contract.py",
    "tests/subscriber/integration/test_maintenance.py",
    "tests/subscriber/integration/test_many_agents.py",
    "tests/subscriber/integration/test_staging.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {config.rootpath / module: i for i, module in enumerate(LONGEST_MODULES)}
    items.sort(key=lambda item: rank.get(item.path, len(rank)))


@pytest.fixture(autouse=True)
def spark_class_archive(request: pytest.FixtureRequest) -> None:
    """Spark JVMs that integration tests start (daemons, CLI commands) map the class-data
    archive (subscriber/spark_archive.py) once one is built: they start about a quarter faster.
    A value the caller set wins."""
    if "SCD_SUBSCRIBER_SPARK_CLASS_ARCHIVE" in os.environ:
        return
    if request.node.get_closest_marker("integration") is None or not services.java_available():
        return
    archive = services.spark_class_archive()
    if archive is not None:
        os.environ["SCD_SUBSCRIBER_SPARK_CLASS_ARCHIVE"] = str(archive)


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
