"""The container tests share one compose cluster (deploy/compose.sh up), brought up once for the
session: each `up` starts three Spark drivers, minutes on a 2-core machine.

They run where a Docker engine answers, the compose plugin is installed and the cluster's
images are built; elsewhere they are skipped, saying why, unless SCD_TEST_COMPOSE=1 (CI) makes
that a failure.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.containers.compose import (
    PUBLISHER,
    REQUIRED_VARIABLE,
    ComposeCluster,
    ComposeError,
    missing_images,
    unavailable_reason,
)
from tests.services import S3Service, use_s3

# The cluster's Spark JVMs run with the tests' JVM options (tests/conftest.py): every
# `up` starts seven of them at once on the machine's two cores.
os.environ.setdefault("SCD_COMPOSE_JAVA_TOOL_OPTIONS", os.environ.get("JAVA_TOOL_OPTIONS", ""))


def _unavailable() -> str | None:
    reason = unavailable_reason()
    if reason is None:
        missing = missing_images()
        if missing:
            reason = (
                f"the cluster's images are not built ({', '.join(missing)}): deploy/compose.sh up"
            )
    return reason


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip every container test, saying why, when no cluster can run here."""
    ours = [item for item in items if item.get_closest_marker("containers") is not None]
    if not ours:
        return
    reason = _unavailable()
    if reason is None or os.environ.get(REQUIRED_VARIABLE) == "1":
        return  # with SCD_TEST_COMPOSE=1 the cluster fixture fails with the reason instead
    for item in ours:
        item.add_marker(pytest.mark.skip(reason=f"no compose cluster: {reason}"))


class Report:
    """What the container tests measured, as one JSON document beside the test's files."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sections: dict[str, Any] = {}

    def add(self, name: str, values: dict[str, Any]) -> None:
        self.sections[name] = values
        self.path.write_text(json.dumps(self.sections, indent=2, sort_keys=True) + "\n")

    def say(self, capsys: pytest.CaptureFixture[str], name: str, values: dict[str, Any]) -> None:
        """Record a section and print it, shown even when output is captured."""
        self.add(name, values)
        with capsys.disabled():
            print(f"\n[containers] {name}: {json.dumps(values, sort_keys=True)}", file=sys.stderr)


@pytest.fixture(scope="session")
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Report]:
    path = tmp_path_factory.getbasetemp() / "containers-report.json"
    started = time.monotonic()
    out = Report(path)
    yield out
    out.add("phase", {"seconds": round(time.monotonic() - started, 1)})
    print(f"\n[containers] report: {path}", file=sys.stderr)


@pytest.fixture(scope="session")
def compose(report: Report) -> Iterator[ComposeCluster]:
    reason = _unavailable()
    if reason is not None:
        pytest.fail(f"{REQUIRED_VARIABLE}=1 but no compose cluster can run: {reason}")
    cluster = ComposeCluster()
    try:
        was_up = cluster.container(PUBLISHER).status == "running"
    except ComposeError:
        was_up = False
    seconds = cluster.up()
    report.add("up", {"seconds": round(seconds, 1), "was_running": was_up})
    try:
        yield cluster
    finally:
        if not was_up:  # leave a developer's running cluster running
            cluster.down()


@pytest.fixture(scope="session")
def compose_spark(spark: Any, compose: ComposeCluster) -> Any:
    """The session's local SparkSession, its s3a:// on the cluster's S3 server."""
    ep = compose.endpoints()
    use_s3(
        spark,
        S3Service(ep.s3_endpoint, ep.s3_access_key, ep.s3_secret_key, ep.s3_region, origin="env"),
    )
    return spark
