"""deploy/cluster.sh: the native local cluster comes up on the running Kafka and S3 server,
distributes through the publisher's REST API to every subscriber, reports its processes and
stops every one of them.

Each run uses its own SCD_HOME, cluster directory, ports, topics and buckets, so it neither
sees nor disturbs a developer's cluster; the Spark jars are the shared ones of deploy/.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3
import httpx
import pytest

from tests import services
from tests.services import KafkaService, S3Service
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CLUSTER_SH = services.DEPLOY_DIR / "cluster.sh"
SUBSCRIBERS = 2
# `up` starts one Spark JVM per subscriber (plus a master and a worker with
# --spark-standalone): a minute or two on a 2-core machine, several when it is busy.
UP_TIMEOUT_S = 900.0
# `down` waits at most 90 s per subscriber (in parallel) and 45 s for the publisher.
DOWN_TIMEOUT_S = 300.0
STATUS_TIMEOUT_S = 60.0
# From the distribute call to the Delta commit on every subscriber: seconds when idle; a
# standalone executor's first task and a loaded machine can take minutes.
IMPORT_TIMEOUT_S = 300.0
HTTP_TIMEOUT_S = 30.0
# Ports are drawn from this range, away from cluster.sh's defaults (17077, 18080, 18090,
# 18180) and from the native Kafka/S3 ports (19092, 19093, 19000).
PORT_RANGE = (20000, 30000)
# Ports the cluster needs beyond the subscribers': publisher, Spark master and its two UIs.
EXTRA_PORTS = 4


@dataclass
class Cluster:
    env: dict[str, str]
    directory: Path
    publisher_port: int
    subscriber_urls: list[str]

    @property
    def publisher_url(self) -> str:
        return f"http://127.0.0.1:{self.publisher_port}"

    def run(
        self, *args: str, timeout: float = STATUS_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(CLUSTER_SH), *args],
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def pids(self) -> dict[str, int]:
        return {
            pidfile.stem: int(pidfile.read_text())
            for pidfile in (self.directory / "run").glob("*.pid")
        }


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_block(count: int) -> int:
    """The first of ``count`` consecutive free ports."""
    for _ in range(100):
        base = random.randrange(PORT_RANGE[0], PORT_RANGE[1] - count)
        if all(_free(base + i) for i in range(count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports in {PORT_RANGE}")


def group_members(pgids: set[int]) -> list[str]:
    """Live (non-zombie) processes whose process group is one of ``pgids``."""
    found: list[str] = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # exited meanwhile
        fields = text.rsplit(")", 1)[1].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp in pgids and state not in ("Z", "X"):
            found.append(f"{stat.parent.name} ({text.split(' ', 2)[1]}, state {state})")
    return found


@pytest.fixture
def cluster(
    kafka_service: KafkaService,
    s3_service: S3Service,
    unique_name: str,
    tmp_path: Path,
) -> Iterator[Cluster]:
    base = free_port_block(SUBSCRIBERS + EXTRA_PORTS)
    publisher_port, spark_port, spark_ui_port = base, base + 1, base + 2  # UIs: +2, +3
    subscriber_port = base + EXTRA_PORTS
    env = {name: value for name, value in os.environ.items() if not name.startswith("SCD_")}
    topics = {
        f"SCD_JOURNAL_TOPICS__{kind.upper()}": topic
        for kind, topic in services.unique_topics(unique_name).items()
    }
    env.update(
        {
            **topics,
            "SCD_HOME": str(tmp_path / "home"),
            "SCD_CLUSTER_DIR": str(tmp_path / "cluster"),
            "SCD_CLUSTER_LOG_DIR": str(tmp_path / "logs"),
            "SCD_CLUSTER_SUBSCRIBERS": str(SUBSCRIBERS),
            "SCD_CLUSTER_PUBLISHER_PORT": str(publisher_port),
            "SCD_CLUSTER_SUBSCRIBER_PORT": str(subscriber_port),
            "SCD_CLUSTER_SPARK_PORT": str(spark_port),
            "SCD_CLUSTER_SPARK_UI_PORT": str(spark_ui_port),
            "SCD_CLUSTER_CONTENT_BUCKET": f"{unique_name}-content",
            "SCD_CLUSTER_KAFKA_BOOTSTRAP": kafka_service.bootstrap,
            "SCD_CLUSTER_S3_ENDPOINT": s3_service.endpoint_url,
            "SCD_S3_ACCESS_KEY": s3_service.access_key,
            "SCD_S3_SECRET_KEY": s3_service.secret_key,
            "SCD_S3_REGION": s3_service.region,
            "SCD_BLOB_BUCKET": f"{unique_name}-blobs",
            "SCD_PUBLISHER_LEADER_TOPIC": f"{unique_name}.leader",
            # The jars deploy/ already fetched (the fresh SCD_HOME has none).
            "SCD_SUBSCRIBER_SPARK_JARS": ",".join(services.spark_jars(s3a=True)),
        }
    )
    cluster = Cluster(
        env,
        tmp_path / "cluster",
        publisher_port,
        [f"http://127.0.0.1:{subscriber_port + i}" for i in range(SUBSCRIBERS)],
    )
    try:
        yield cluster
    finally:
        leftover = cluster.pids()
        if leftover:  # the test failed before its own down: leave nothing running
            cluster.run("down", timeout=DOWN_TIMEOUT_S)


def processed_offset(url: str) -> int:
    try:
        answer = httpx.get(f"{url}/health", timeout=HTTP_TIMEOUT_S)
    except httpx.HTTPError:
        return -1
    offset = answer.json().get("processedOffset")
    return -1 if offset is None else int(offset)


@pytest.mark.timeout(UP_TIMEOUT_S + IMPORT_TIMEOUT_S + DOWN_TIMEOUT_S + 300)
@pytest.mark.parametrize(
    "options",
    [
        pytest.param([], id="local"),
        pytest.param(["--s3a", "--spark-standalone"], id="s3a-standalone"),
    ],
)
def test_cluster_up_distribute_status_down(
    cluster: Cluster, s3_service: S3Service, options: list[str]
) -> None:
    up = cluster.run("up", *options, timeout=UP_TIMEOUT_S)
    assert up.returncode == 0, up.stdout + up.stderr
    assert "cluster up in" in up.stderr
    pids = cluster.pids()
    expected = {"publisher", *(f"subscriber-{i + 1}" for i in range(SUBSCRIBERS))}
    if "--spark-standalone" in options:
        expected |= {"spark-master", "spark-worker"}
    assert set(pids) == expected

    again = cluster.run("up", *options, timeout=UP_TIMEOUT_S)
    assert again.returncode == 0, again.stdout + again.stderr
    assert cluster.pids() == pids, "a second up must leave the running processes alone"

    token = (cluster.directory / "token").read_text().strip()
    headers = {"Authorization": f"Bearer {token}"}
    assert (
        httpx.post(
            f"{cluster.publisher_url}/distribute",
            json={"action": "ADD", "paths": ["/content/x"]},
            timeout=HTTP_TIMEOUT_S,
        ).status_code
        == 401
    ), "the publisher must require its token"
    offsets = []
    for name in ("home", "about"):
        answer = httpx.post(
            f"{cluster.publisher_url}/distribute",
            headers=headers,
            json={
                "action": "ADD",
                "paths": [f"/content/{name}"],
                "nodes": [{"path": f"/content/{name}", "properties": {"title": name}}],
            },
            timeout=HTTP_TIMEOUT_S,
        )
        assert answer.status_code == 200, answer.text
        offsets.append(int(answer.json()["offset"]))
    last = max(offsets)
    wait_for(
        lambda: all(processed_offset(url) >= last for url in cluster.subscriber_urls),
        IMPORT_TIMEOUT_S,
        f"every subscriber to process offset {last}",
    )
    for i in range(1, SUBSCRIBERS + 1):
        if "--s3a" in options:
            s3 = boto3.client(
                "s3",
                endpoint_url=s3_service.endpoint_url,
                aws_access_key_id=s3_service.access_key,
                aws_secret_access_key=s3_service.secret_key,
                region_name=s3_service.region,
            )
            listing = s3.list_objects_v2(
                Bucket=cluster.env["SCD_CLUSTER_CONTENT_BUCKET"],
                Prefix=f"subscriber-{i}/_delta_log/",
            )
            assert listing.get("KeyCount", 0) > 0, f"no Delta log of subscriber-{i} on S3"
        else:
            assert (cluster.directory / "stores" / f"subscriber-{i}" / "_delta_log").is_dir()

    status = cluster.run("status")
    assert status.returncode == 0, status.stdout + status.stderr
    rows = {line.split()[0]: line.split() for line in status.stdout.splitlines()[1:]}
    assert set(rows) == expected
    assert rows["publisher"][1:4] == [str(pids["publisher"]), str(cluster.publisher_port), "yes"]
    for i in range(1, SUBSCRIBERS + 1):
        row = rows[f"subscriber-{i}"]
        assert row[1] == str(pids[f"subscriber-{i}"])
        assert f"offset={last}" in row, row

    down = cluster.run("down", timeout=DOWN_TIMEOUT_S)
    assert down.returncode == 0, down.stdout + down.stderr
    assert cluster.pids() == {}
    assert group_members(set(pids.values())) == [], "processes left after down"
    after = cluster.run("status")
    assert after.returncode == 3
    assert all(line.split()[1:2] == ["-"] for line in after.stdout.splitlines()[1:])
