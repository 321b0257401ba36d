"""A steady stream of packages through the compose cluster (deploy/compose.sh) and, in the same
run, the same stream through the native cluster of deploy/cluster.sh with the same topology
(stores on S3, a Spark master and worker, three subscribers): publish→imported p50/p99 side by
side, and the resident memory of every container (and of every native process group) while
they import.

Latency of a package on a subscriber = timestamp of the Delta commit that holds its offset
(commitInfo in the store's ``_delta_log``, written by the subscriber's driver) - the moment the
client sent its POST /distribute. Both clusters run on this machine's clock (containers share
the kernel's), so the difference needs no clock sync. Packages are the end-to-end tests'
workload (tests/e2e/workload.py, same seed for both): mixed ADD and DELETE of a small tree,
some with large binaries, some spilled.

    .venv/bin/python -m bench.compose_stream                        # 1,000 packages each
    .venv/bin/python -m bench.compose_stream --packages 100 --rate 5  # smoke run

The compose cluster is started if it is not running (and stopped again afterwards); while the
native cluster runs, a compose cluster that was already running is paused, so that the two do
not share the machine's cores. The native cluster gets its own ports, topics and buckets on the
Kafka and S3 server of deploy/services.sh, and is stopped at the end. One JSON document goes to
stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import httpx

from publisher.client import PublisherClient
from publisher.errors import PublisherRefused
from runtime.stats import percentile
from tests import services
from tests.cluster_script import ClusterScript, group_members
from tests.containers import checks
from tests.containers.compose import (
    PUBLISHER,
    SUBSCRIBERS,
    ComposeCluster,
    cgroup_rss_bytes,
    process_rss_bytes,
)
from tests.e2e.workload import Workload

SEED = 1000
# Every subscriber imports the whole stream within this long after the last send (a cluster
# that falls behind at the chosen rate shows it as a long tail, not as a failure).
DRAIN_TIMEOUT_S = 600.0
# How often memory is sampled while the stream runs.
RSS_EVERY_S = 2.0
HTTP_TIMEOUT_S = 60.0
WARM_UP_PACKAGES = 5
MIB = 1024 * 1024


def log(text: str) -> None:
    print(f"[compose_stream] {text}", file=sys.stderr, flush=True)


@dataclass
class Target:
    """One cluster as the stream sees it."""

    name: str
    publisher_url: str
    token: str
    s3: Any  # boto3 client of the S3 server holding the stores
    content_bucket: str
    processed: Callable[[str], int | None]  # subscriber -> processed offset
    rss: Callable[[], dict[str, int]]  # process or container -> resident bytes

    def api(self) -> PublisherClient:
        return PublisherClient(self.publisher_url, self.token, timeout_s=HTTP_TIMEOUT_S)


@dataclass
class Stream:
    sent_ms: dict[int, float] = field(default_factory=dict)  # offset -> wall clock at send
    answer_s: list[float] = field(default_factory=list)
    refused: int = 0
    rss: dict[str, list[int]] = field(default_factory=dict)


def _sample_rss(target: Target, stream: Stream, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            for name, value in target.rss().items():
                stream.rss.setdefault(name, []).append(value)
        except Exception as exc:  # a container or process between states: next sample
            log(f"RSS sample failed: {exc}")
        stop.wait(RSS_EVERY_S)


def wait_imported(target: Target, offset: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while any((target.processed(s) or -1) < offset for s in SUBSCRIBERS):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{target.name}: not every subscriber imported offset {offset}")
        time.sleep(0.5)


def warm_up(target: Target, api: PublisherClient) -> float:
    """A few packages imported by every subscriber before the measured stream: `up` returns
    once each holds a position, its store may open a minute later, and the first commits to a
    table are slower than the next ones."""
    started = time.monotonic()
    offset = -1
    for i in range(WARM_UP_PACKAGES):
        path = f"/warm-up/p{i}"
        body = {"action": "ADD", "paths": [path], "nodes": [{"path": path}]}
        offset = int(api.distribute(body)["offset"])
    wait_imported(target, offset, DRAIN_TIMEOUT_S)
    return time.monotonic() - started


def run_stream(target: Target, packages: int, rate: float) -> dict[str, Any]:
    workload = Workload(SEED)
    stream = Stream()
    with target.api() as api:
        warm_up_s = warm_up(target, api)
    stop = threading.Event()
    sampler = threading.Thread(target=_sample_rss, args=(target, stream, stop), daemon=True)
    sampler.start()
    log(f"{target.name}: {packages} packages at {rate}/s")
    with target.api() as api:
        begin = time.monotonic()
        for i in range(packages):
            pause = begin + i / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            body = workload.next().body()
            sent_ms = time.time() * 1000
            started = time.perf_counter()
            try:
                answer = api.distribute(body)
            except PublisherRefused:
                stream.answer_s.append(time.perf_counter() - started)
                stream.refused += 1
                continue
            stream.answer_s.append(time.perf_counter() - started)
            stream.sent_ms[int(answer["offset"])] = sent_ms
        sent_s = time.monotonic() - begin
    wait_imported(target, max(stream.sent_ms), DRAIN_TIMEOUT_S)
    drained_s = time.monotonic() - begin
    stop.set()
    sampler.join()
    return {"warm_up_s": round(warm_up_s, 1), **summarize(target, stream, sent_s, drained_s)}


def summarize(target: Target, stream: Stream, sent_s: float, drained_s: float) -> dict[str, Any]:
    first, last = min(stream.sent_ms), max(stream.sent_ms)
    per_subscriber: dict[str, Any] = {}
    everything: list[float] = []
    for service in SUBSCRIBERS:
        commits = checks.delta_commits(target.s3, target.content_bucket, service)
        latencies: list[float] = []
        batches = 0
        for commit in commits:
            if commit.offsets is None or commit.offsets[1] < first or commit.offsets[0] > last:
                continue
            batches += 1
            for offset in range(commit.offsets[0], commit.offsets[1] + 1):
                if offset in stream.sent_ms:
                    latencies.append((commit.timestamp_ms - stream.sent_ms[offset]) / 1000)
        assert len(latencies) == len(stream.sent_ms), (
            f"{target.name} {service}: {len(latencies)} of {len(stream.sent_ms)} packages found "
            "in the Delta log"
        )
        everything.extend(latencies)
        per_subscriber[service] = {
            "p50_s": round(percentile(latencies, 50), 3),
            "p99_s": round(percentile(latencies, 99), 3),
            "max_s": round(max(latencies), 3),
            "import_commits": batches,
        }
    return {
        "packages_accepted": len(stream.sent_ms),
        "refused": stream.refused,
        "sent_s": round(sent_s, 1),
        "all_imported_s": round(drained_s, 1),
        "publish_to_imported_p50_s": round(percentile(everything, 50), 3),
        "publish_to_imported_p99_s": round(percentile(everything, 99), 3),
        "distribute_answer_p50_ms": round(percentile(stream.answer_s, 50) * 1000, 1),
        "distribute_answer_p99_ms": round(percentile(stream.answer_s, 99) * 1000, 1),
        "subscribers": per_subscriber,
        "rss_while_importing_mib": {
            name: {
                "max": round(max(values) / MIB),
                "mean": round(statistics.fmean(values) / MIB),
            }
            for name, values in sorted(stream.rss.items())
        },
    }


# ---------------------------------------------------------------- compose


def compose_target(compose: ComposeCluster) -> Target:
    ep = compose.endpoints()
    running = [s for s in compose.services() if compose.container(s).status == "running"]

    def rss() -> dict[str, int]:
        return {s: cgroup_rss_bytes(compose.container(s).pid) for s in running}

    return Target(
        "compose",
        ep.publisher_url,
        ep.token,
        checks.s3_client(ep),
        ep.content_bucket,
        compose.processed_offset,
        rss,
    )


def compose_running(compose: ComposeCluster) -> bool:
    try:
        return compose.container(PUBLISHER).status == "running"
    except Exception:
        return False


# ---------------------------------------------------------------- native


def native_cluster(work: Path) -> tuple[ClusterScript, Target]:
    services.run_deploy("services.sh", "up")
    kafka, s3 = services.native_services()
    name = services.unique_name("stream-bench")
    token = "stream-bench-token-0123456789abcdef"
    settings = {"SCD_PUBLISHER_API_TOKEN": token, "SCD_BLOB_CREATE_BUCKET": "true"}
    script = ClusterScript.configure(work, name, kafka, s3, len(SUBSCRIBERS), settings)
    client = boto3.client(
        "s3",
        endpoint_url=s3.endpoint_url,
        aws_access_key_id=s3.access_key,
        aws_secret_access_key=s3.secret_key,
        region_name=s3.region,
    )

    def processed(service: str) -> int | None:
        try:
            answer = httpx.get(f"{script.subscriber_url(int(service[-1]))}/health", timeout=5)
            offset = answer.json().get("processedOffset")
        except (httpx.HTTPError, ValueError):
            return None
        return None if offset is None else int(offset)

    def rss() -> dict[str, int]:
        out = {}
        for process, pid in script.pids().items():
            members = [int(m.split()[0]) for m in group_members({pid})]
            out[process] = process_rss_bytes(members)
        return out

    target = Target(
        "native",
        script.publisher_url,
        token,
        client,
        script.env["SCD_CLUSTER_CONTENT_BUCKET"],
        processed,
        rss,
    )
    return script, target


def native_stream(running_compose: ComposeCluster | None, args: argparse.Namespace) -> Any:
    """The stream through a native cluster of its own; a running compose cluster is paused
    meanwhile (and resumed)."""
    compose = running_compose
    paused = (
        [s for s in compose.services() if compose.container(s).status == "running"]
        if compose is not None
        else []
    )
    for service in paused:
        assert compose is not None
        compose.pause(service)
    try:
        with tempfile.TemporaryDirectory(prefix="scd-stream-bench-") as work:
            script, target = native_cluster(Path(work))
            started = time.monotonic()
            log("starting the native cluster (deploy/cluster.sh up --s3a --spark-standalone)")
            script.up("--s3a", "--spark-standalone")
            up_s = round(time.monotonic() - started, 1)
            try:
                native: dict[str, Any] = run_stream(target, args.packages, args.rate)
                log(json.dumps(native))
            finally:
                script.down()
    finally:
        for service in paused:
            assert compose is not None
            compose.unpause(service)
    return {"up_s": up_s, **native}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packages", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=10.0, help="packages per second")
    parser.add_argument("--skip-native", action="store_true")
    parser.add_argument("--skip-compose", action="store_true")
    args = parser.parse_args()
    result: dict[str, Any] = {
        "packages": args.packages,
        "rate_per_s": args.rate,
        "cpu_count": os.cpu_count(),
        "load_avg_1m_at_start": round(os.getloadavg()[0], 2),
    }

    compose = ComposeCluster()
    was_running = not args.skip_compose and compose_running(compose)
    if not args.skip_compose:
        if not was_running:
            log("starting the compose cluster")
            result["compose_up_s"] = round(compose.up(), 1)
        try:
            result["compose"] = run_stream(compose_target(compose), args.packages, args.rate)
            log(json.dumps(result["compose"]))
        finally:
            if not was_running:
                log("stopping the compose cluster")
                compose.down()
    if not args.skip_native:
        result["native"] = native_stream(compose if was_running else None, args)
    if "compose" in result and "native" in result:
        for pct in ("p50", "p99"):
            key = f"publish_to_imported_{pct}_s"
            result[f"compose_over_native_{pct}"] = round(
                result["compose"][key] / result["native"][key], 2
            )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
