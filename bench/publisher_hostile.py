"""Publisher under hostile input: what one attacker without the token, or with write access to the
discovery topic, costs a real publisher daemon. Prints one JSON document (progress on stderr).

* ``auth``: 100 unauthenticated ``POST /distribute`` requests declaring a 24 MB JSON body over
  raw sockets: the time to each 401 (target < 50 ms), the daemon's RSS before and after and its
  peak (VmHWM), and ``GET /health`` latency sampled all along (target p99 < 20 ms).
* ``discovery``: 50,000 DiscoveryMessages with random instance ids written to the daemon's
  journal: RSS growth (target < 100 MiB), the ``GET /queues`` answer (target < 1 MB).

The daemon is ``python -m scd publisher`` on the embedded SQLite journal and a local blob store.
``--baseline-ref <commit>`` runs the same against that commit's code (extracted with
``git archive``), side by side; the baseline runs fewer auth requests (each reads 24 MB).

    .venv/bin/python -m bench.publisher_hostile
    .venv/bin/python -m bench.publisher_hostile --baseline-ref b91a984 --baseline-requests 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.publisher_bench import TOKEN, percentiles, spawn_publisher, wait_ready
from journal.messaging import MessageSender
from journal.settings import TopicSettings
from journal.sqlite.journal import SqliteJournal
from journal.wire.messages import DiscoveryMessage, SubscriberConfiguration, SubscriberState
from publisher.client import PublisherClient
from tests.services import free_port

REPO_DIR = Path(__file__).resolve().parent.parent
# The request: 24 MB of JSON.
BODY_BYTES = 24 * 1024 * 1024
DEFAULT_REQUESTS = 100
DEFAULT_ANNOUNCEMENTS = 50_000
# Body bytes written per send while waiting for the answer.
SEND_CHUNK = 256 * 1024
# One hostile request may take this long (the baseline reads and parses 24 MB).
REQUEST_TIMEOUT_S = 120.0
# /health is sampled this often while the hostile requests run (and as long before them, idle).
HEALTH_EVERY_S = 0.005
READY_TIMEOUT_S = 60.0
# After start and after the flood: let allocations and the first refresh settle.
SETTLE_S = 3.0
DRAIN_TIMEOUT_S = 600.0
MIB = 1024 * 1024


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def memory_mib(pid: int) -> dict[str, float]:
    """VmRSS (now) and VmHWM (peak) of a process, in MiB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = round(int(rest.split()[0]) / 1024, 1)
    return values


def counted(samples_s: list[float]) -> dict[str, float]:
    return {"count": len(samples_s), **percentiles(samples_s, digits=2)}


@dataclass
class Daemon:
    process: subprocess.Popen[bytes]
    url: str
    port: int
    journal_path: Path


@contextmanager
def publisher(code_dir: Path, work: Path) -> Iterator[Daemon]:
    """A publisher daemon running the code in ``code_dir``, on a fresh journal in ``work``."""
    port = free_port()
    journal_path = work / "journal.db"
    process = spawn_publisher(
        {
            "SCD_JOURNAL_BACKEND": "sqlite",
            "SCD_JOURNAL_SQLITE_PATH": str(journal_path),
            "SCD_BLOB_BACKEND": "local",
            "SCD_BLOB_LOCAL_ROOT": str(work / "blobs"),
            "SCD_PUBLISHER_API_TOKEN": TOKEN,
            "SCD_PUBLISHER_PORT": str(port),
            "PYTHONPATH": str(code_dir),  # the baseline's packages before the installed ones
        },
        code_dir,
        work / "publisher.log",
    )
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_ready(url, process):
            raise SystemExit(f"publisher did not become ready; see {work / 'publisher.log'}")
        time.sleep(SETTLE_S)
        yield Daemon(process, url, port, journal_path)
    finally:
        process.terminate()
        process.wait(30)


# ---------------------------------------------------------------- auth before body


def hostile_body() -> bytes:
    """24 MB of valid JSON that is costly to parse: ~290,000 small node objects."""
    nodes, size, i = [], 60, 0
    while size < BODY_BYTES - 100:
        node = f'{{"path":"/c/n{i}","properties":{{"title":"t{i}","n":{i}}}}}'
        nodes.append(node)
        size += len(node) + 1
        i += 1
    body = ('{"action":"ADD","paths":["/c"],"nodes":[' + ",".join(nodes) + "]}").encode()
    return body + b" " * (BODY_BYTES - len(body))


def unauthenticated_post(port: int, body: bytes) -> tuple[float, int, int]:
    """One POST /distribute without a token, sending the body until the answer comes; returns
    (seconds from the end of the headers to the status line, status, body bytes sent)."""
    head = (
        f"POST /distribute HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT_S) as sock:
        sock.sendall(head)
        started = time.perf_counter()
        sent, answer = 0, b""
        deadline = started + REQUEST_TIMEOUT_S
        while b"\r\n" not in answer and time.perf_counter() < deadline:
            writable = [sock] if sent < len(body) else []
            readable, can_write, _ = select.select([sock], writable, [], 1.0)
            if readable:
                try:
                    chunk = sock.recv(65536)
                except ConnectionResetError:
                    break
                if not chunk:
                    break
                answer += chunk
            elif can_write:
                try:
                    sent += sock.send(body[sent : sent + SEND_CHUNK])
                except (BrokenPipeError, ConnectionResetError):
                    sent = len(body)  # the server closed: stop sending, read what came
        elapsed = time.perf_counter() - started
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
    return elapsed, status, sent


def sample_health(url: str, stop: threading.Event, out: list[float]) -> None:
    with PublisherClient(url, timeout_s=10) as api:
        api.response("GET", "/health")  # the connection, outside the samples
        while not stop.is_set():
            started = time.perf_counter()
            api.response("GET", "/health")
            out.append(time.perf_counter() - started)
            stop.wait(HEALTH_EVERY_S)


def bench_auth(code_dir: Path, requests: int, body: bytes) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, publisher(code_dir, Path(tmp)) as daemon:
        before = memory_mib(daemon.process.pid)
        idle: list[float] = []
        stop = threading.Event()
        sampler = threading.Thread(target=sample_health, args=(daemon.url, stop, idle))
        sampler.start()
        time.sleep(1.0)
        stop.set()
        sampler.join()
        health: list[float] = []
        stop = threading.Event()
        sampler = threading.Thread(target=sample_health, args=(daemon.url, stop, health))
        sampler.start()
        time.sleep(0.1)  # connected before the first hostile request
        answers: list[float] = []
        statuses: dict[int, int] = {}
        sent_total = 0
        try:
            for i in range(requests):
                elapsed, status, sent = unauthenticated_post(daemon.port, body)
                answers.append(elapsed)
                statuses[status] = statuses.get(status, 0) + 1
                sent_total += sent
                if i % 10 == 0:
                    log(f"auth: request {i + 1}/{requests}: {status} in {elapsed * 1000:.1f} ms")
        finally:
            stop.set()
            sampler.join()
        after = memory_mib(daemon.process.pid)
    return {
        "requests": requests,
        "declared_body_bytes": len(body),
        "statuses": statuses,
        "body_mib_sent_per_request": round(sent_total / requests / MIB, 2),
        "answer": counted(answers),
        "health_idle": counted(idle),
        "health_during": counted(health),
        "rss_mib_before": before["VmRSS"],
        "rss_mib_after": after["VmRSS"],
        "rss_mib_peak": after["VmHWM"],
    }


# ---------------------------------------------------------------- forged announcements


def forge_announcements(journal_path: Path, count: int) -> None:
    journal = SqliteJournal(journal_path)
    try:
        sender = MessageSender(journal, TopicSettings().discovery)
        pending = []
        for _ in range(count):
            message = DiscoveryMessage(
                sub_sling_id=str(uuid.uuid4()),
                sub_agent_name="subscriber",
                subscriber_configuration=SubscriberConfiguration(editable=True, max_retries=-1),
            )
            message.subscriber_state.append(SubscriberState(pub_agent_name="publish", offset=-1))
            pending.append(sender.start_send(message, key="subscriber"))
        for sent in pending:
            journal.finish_send(sent)
    finally:
        journal.close()


def queue_count(api: PublisherClient) -> tuple[int, int]:
    """(alive queues as the daemon counts them, body bytes of a default GET /queues)."""
    response = api.response("GET", "/queues")
    total = response.headers.get("x-total-count")  # the baseline answers every queue
    return (int(total) if total is not None else len(response.json())), len(response.content)


def bench_discovery(code_dir: Path, announcements: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, publisher(code_dir, Path(tmp)) as daemon:
        before = memory_mib(daemon.process.pid)
        started = time.monotonic()
        forge_announcements(daemon.journal_path, announcements)
        written_s = time.monotonic() - started
        log(f"discovery: {announcements} announcements written in {written_s:.1f} s")
        with PublisherClient(daemon.url, timeout_s=60) as api:
            previous, count, body = -1, 0, 0
            deadline = time.monotonic() + DRAIN_TIMEOUT_S
            # Read until the count stops moving: capped (new code) or every one (baseline).
            while time.monotonic() < deadline:
                count, body = queue_count(api)
                if count == previous and count > 0:
                    break
                previous = count
                time.sleep(SETTLE_S)
            consumed_s = time.monotonic() - started
            timings = []
            for _ in range(10):
                t0 = time.perf_counter()
                queue_count(api)
                timings.append(time.perf_counter() - t0)
            largest = api.http.get("/queues", params={"limit": 1000})
            metrics = api.http.get("/metrics").text
        after = memory_mib(daemon.process.pid)
    dropped = [line for line in metrics.splitlines() if line.startswith("scd_discovery_dropped")]
    return {
        "announcements": announcements,
        "seconds_until_consumed": round(consumed_s, 1),
        "queues_seen": count,
        "queues_default_body_bytes": body,
        "queues_limit_1000_body_bytes": len(largest.content) if largest.is_success else None,
        "queues_get": counted(timings),
        "metrics_body_bytes": len(metrics),
        "dropped_metric": dropped[0] if dropped else None,
        "rss_mib_before": before["VmRSS"],
        "rss_mib_after": after["VmRSS"],
        "rss_mib_growth": round(after["VmRSS"] - before["VmRSS"], 1),
        "rss_mib_peak": after["VmHWM"],
    }


def extract(ref: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "archive", ref], cwd=REPO_DIR, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["auth", "discovery", "both"], default="both")
    parser.add_argument("--requests", type=int, default=DEFAULT_REQUESTS)
    parser.add_argument("--announcements", type=int, default=DEFAULT_ANNOUNCEMENTS)
    parser.add_argument("--baseline-ref", help="also run this commit's code, side by side")
    parser.add_argument("--baseline-requests", type=int, default=3)
    args = parser.parse_args()
    result: dict[str, Any] = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "targets": {
            "answer_p99_ms": 50,
            "health_p99_ms": 20,
            "rss_mib_growth": 100,
            "queues_body_bytes": 1_000_000,
        },
    }
    with tempfile.TemporaryDirectory() as tmp:
        variants = {"current": REPO_DIR}
        if args.baseline_ref:
            variants["baseline"] = extract(args.baseline_ref, Path(tmp))
            result["baseline_ref"] = args.baseline_ref
        body = hostile_body() if args.mode in ("auth", "both") else b""
        for name, code_dir in variants.items():
            if args.mode in ("auth", "both"):
                requests = args.requests if name == "current" else args.baseline_requests
                log(f"{name}: auth, {requests} requests")
                result.setdefault("auth", {})[name] = bench_auth(code_dir, requests, body)
            if args.mode in ("discovery", "both"):
                log(f"{name}: discovery, {args.announcements} announcements")
                result.setdefault("discovery", {})[name] = bench_discovery(
                    code_dir, args.announcements
                )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
