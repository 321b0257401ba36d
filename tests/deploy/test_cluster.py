"""deploy/cluster.sh: the native local cluster comes up on the running Kafka and S3 server,
distributes through the publisher's REST API to every subscriber, reports its processes and
stops every one of them (tests/cluster_script.py gives each run its own directories, ports,
topics and buckets).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from publisher.client import PublisherClient
from tests import services
from tests.cluster_script import DOWN_TIMEOUT_S, UP_TIMEOUT_S, ClusterScript, group_members
from tests.services import KafkaService, S3Service
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SUBSCRIBERS = 2
# From the distribute call to the Delta commit on every subscriber: seconds when idle; a
# standalone executor's first task and a loaded machine can take minutes.
IMPORT_TIMEOUT_S = 300.0
HTTP_TIMEOUT_S = 30.0


@pytest.fixture
def cluster(
    kafka_service: KafkaService,
    s3_service: S3Service,
    unique_name: str,
    tmp_path: Path,
) -> Iterator[ClusterScript]:
    cluster = ClusterScript.configure(
        tmp_path, unique_name, kafka_service, s3_service, SUBSCRIBERS, settings={}
    )
    try:
        yield cluster
    finally:
        if cluster.pids():  # the test failed before its own down: leave nothing running
            cluster.down()


def processed_offset(url: str) -> int:
    try:
        answer = httpx.get(f"{url}/health", timeout=HTTP_TIMEOUT_S)
    except httpx.HTTPError:
        return -1
    offset = answer.json().get("processedOffset")
    return -1 if offset is None else int(offset)


def imported_packages(url: str) -> int:
    """Packages the subscriber imported since it started (its import size histogram's count)."""
    text = httpx.get(f"{url}/metrics", timeout=HTTP_TIMEOUT_S).text
    counts = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("scd_imported_package_size_bytes_count")
    ]
    return int(sum(counts))


def command_lines_holding(secret: str, pgids: set[int]) -> list[str]:
    """The processes of the process groups ``pgids`` whose command line holds ``secret``."""
    found = []
    for member in group_members(pgids):
        pid = member.split()[0]
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue  # exited meanwhile
        if secret.encode() in command:
            found.append(f"{pid}: {command[:80]!r}")
    return found


@pytest.mark.timeout(UP_TIMEOUT_S + IMPORT_TIMEOUT_S + DOWN_TIMEOUT_S + 300)
@pytest.mark.parametrize(
    "options",
    [
        pytest.param([], id="local"),
        pytest.param(["--s3a", "--spark-standalone"], id="s3a-standalone"),
    ],
)
def test_cluster_up_distribute_status_down(
    cluster: ClusterScript, s3_service: S3Service, options: list[str]
) -> None:
    up = cluster.run("up", *options, timeout=UP_TIMEOUT_S)
    assert up.returncode == 0, up.stdout + up.stderr
    assert "cluster up in" in up.stderr
    pids = cluster.pids()
    expected = {"publisher", *(f"subscriber-{i + 1}" for i in range(SUBSCRIBERS))}
    if "--spark-standalone" in options:
        expected |= {"spark-master", "spark-worker"}
    assert set(pids) == expected

    # Distributed the moment up returned (the stores may still be opening): every subscriber
    # imports these, none starts after them.
    token = (cluster.directory / "token").read_text().strip()
    assert (
        httpx.post(
            f"{cluster.publisher_url}/distribute",
            json={"action": "ADD", "paths": ["/content/x"]},
            timeout=HTTP_TIMEOUT_S,
        ).status_code
        == 401
    ), "the publisher must require its token"
    offsets = []
    with PublisherClient(cluster.publisher_url, token, timeout_s=HTTP_TIMEOUT_S) as api:
        for name in ("home", "about"):
            answer = api.distribute(
                {
                    "action": "ADD",
                    "paths": [f"/content/{name}"],
                    "nodes": [{"path": f"/content/{name}", "properties": {"title": name}}],
                }
            )
            offsets.append(int(answer["offset"]))
    last = max(offsets)
    wait_for(
        lambda: all(
            processed_offset(cluster.subscriber_url(i)) >= last for i in range(1, SUBSCRIBERS + 1)
        ),
        IMPORT_TIMEOUT_S,
        f"every subscriber to process offset {last}",
    )
    for i in range(1, SUBSCRIBERS + 1):
        health = httpx.get(f"{cluster.subscriber_url(i)}/health", timeout=HTTP_TIMEOUT_S).json()
        assert health["holdsPosition"] is True
        assert health["startOffset"] <= min(offsets), health
        assert imported_packages(cluster.subscriber_url(i)) == len(offsets)
    # Every process of the cluster has the S3 credentials (the blob store; with --s3a the
    # stores too), none on its command line, which every local user can read: not the
    # daemons', not their Spark JVMs', not the executors'.
    leaks = command_lines_holding(s3_service.secret_key, set(pids.values()))
    assert not leaks, f"the S3 secret key is on the command line of {leaks}"
    if "--spark-standalone" in options:
        # The worker is on this host: its executors read the drivers' jars in place, none is
        # copied into an executor's folder (s3a's AWS bundle alone is 558 MB each).
        executors = list((cluster.directory / "spark" / "work").glob("app-*/*"))
        assert len(executors) >= SUBSCRIBERS, f"executors: {executors}"
        copied = [jar.name for folder in executors for jar in folder.glob("*.jar")]
        assert not copied, f"jars copied to the executors: {copied}"

    again = cluster.run("up", *options, timeout=UP_TIMEOUT_S)
    assert again.returncode == 0, again.stdout + again.stderr
    assert cluster.pids() == pids, "a second up must leave the running processes alone"
    for i in range(1, SUBSCRIBERS + 1):
        if "--s3a" in options:
            s3 = services.s3_client(s3_service)
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
