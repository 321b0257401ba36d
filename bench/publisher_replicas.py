"""Publisher replicas: distribute throughput and latency with one instance and with two of one
agent (clients round-robin over both), side by side in one run, and the failover when the
leader dies.

Prints one JSON document (progress goes to stderr):

* ``runs``: for each variant (``one``: one instance; ``two``: two instances, each request to
  the next one, so half of them are forwarded to the leader; ``baseline`` with ``--baseline
  TREE``: one instance of another checkout, e.g. the code before replicas, to price the
  fenced writer), ``rounds`` rounds alternating the variants: requests per second from
  ``--clients`` concurrent clients and the latency p50/p99 (nearest rank).
* ``failover``: two instances under the same load; the leader is killed (SIGKILL, or SIGTERM
  with ``--signal term``): how many requests were refused (503 or no answer) and the longest
  time no request was acknowledged, from the signal on.

    .venv/bin/python -m bench.publisher_replicas --bootstrap 127.0.0.1:19092
    git worktree add /tmp/before 291eecd
    .venv/bin/python -m bench.publisher_replicas --baseline /tmp/before --rounds 3
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.kafka_broker import resolve_bootstrap
from bench.publisher_bench import TOKEN, distribute_body, log, percentiles, start_publisher
from publisher.client import PublisherClient
from runtime.errors import ScdError

REPO_DIR = Path(__file__).resolve().parent.parent
DEFAULT_REQUESTS = 600
DEFAULT_CLIENTS = 8
DEFAULT_ROUNDS = 2
WARMUP_REQUESTS = 20
# The failover run: requests before the kill, and after it until this many were acknowledged.
FAILOVER_BEFORE = 200
FAILOVER_AFTER = 200
FAILOVER_TIMEOUT_S = 120.0
CLIENT_TIMEOUT_S = 30.0


class Fleet:
    """Publisher processes of one agent (fresh topics per fleet)."""

    def __init__(self, bootstrap: str, work: Path, count: int, tree: Path) -> None:
        prefix = f"bench-rep-{uuid.uuid4().hex[:10]}"
        self.processes: list[subprocess.Popen[bytes]] = []
        self.urls: list[str] = []
        for n in range(count):
            process, url = start_publisher(bootstrap, prefix, work, f"pub-{n}", tree)
            self.processes.append(process)
            self.urls.append(url)
        if count > 1:
            self.wait_for_one_leader()

    def leader(self) -> int | None:
        leaders = []
        for i, url in enumerate(self.urls):
            if self.processes[i].poll() is not None:
                continue
            try:
                with PublisherClient(url, timeout_s=2) as api:
                    if api.agent()["leader"]:
                        leaders.append(i)
            except (ScdError, ValueError, KeyError):
                pass
        return leaders[0] if len(leaders) == 1 else None

    def wait_for_one_leader(self) -> int:
        deadline = time.monotonic() + FAILOVER_TIMEOUT_S
        while time.monotonic() < deadline:
            found = self.leader()
            if found is not None:
                return found
            time.sleep(0.2)
        raise SystemExit("no single leader among the publishers")

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(40)
            except subprocess.TimeoutExpired:
                process.kill()


def load(
    urls: list[str],
    clients: int,
    done: Callable[[int], bool],
    body: dict[str, Any],
) -> tuple[list[float], list[float], int, float]:
    """Clients round-robin over ``urls`` until ``done(acknowledged)``: (latencies of the
    acknowledged requests, the times they were acknowledged, refusals, elapsed seconds)."""
    turn = itertools.count()
    lock = threading.Lock()
    latencies: list[float] = []
    acknowledged_at: list[float] = []
    refused = 0

    def client() -> None:
        nonlocal refused
        with PublisherClient(token=TOKEN, timeout_s=CLIENT_TIMEOUT_S) as api:
            while True:
                with lock:
                    if done(len(latencies)):
                        return
                    url = urls[next(turn) % len(urls)]
                t0 = time.perf_counter()
                try:
                    ok = api.response("POST", f"{url}/distribute", json=body).status_code == 200
                except ScdError:
                    ok = False
                t1 = time.perf_counter()
                with lock:
                    if ok:
                        latencies.append(t1 - t0)
                        acknowledged_at.append(t1)
                    else:
                        refused += 1

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, acknowledged_at, refused, time.perf_counter() - started


def measure(fleet: Fleet, requests: int, clients: int) -> dict[str, Any]:
    body = distribute_body()
    load(fleet.urls, clients, lambda n: n >= WARMUP_REQUESTS, body)
    latencies, _, refused, elapsed = load(fleet.urls, clients, lambda n: n >= requests, body)
    return {
        "requests": len(latencies),
        "refused": refused,
        "per_s": round(len(latencies) / elapsed, 1),
        **percentiles(latencies),
    }


def failover(bootstrap: str, work: Path, clients: int, how: signal.Signals) -> dict[str, Any]:
    fleet = Fleet(bootstrap, work, 2, REPO_DIR)
    try:
        leader = fleet.wait_for_one_leader()
        body = distribute_body()
        killed_at: list[float] = []
        target = FAILOVER_BEFORE + FAILOVER_AFTER

        def done(acknowledged: int) -> bool:
            if acknowledged >= FAILOVER_BEFORE and not killed_at:
                fleet.processes[leader].send_signal(how)
                killed_at.append(time.perf_counter())
            return acknowledged >= target or (
                bool(killed_at) and time.perf_counter() - killed_at[0] > FAILOVER_TIMEOUT_S
            )

        _, acknowledged_at, refused, _ = load(fleet.urls, clients, done, body)
        kill = killed_at[0]
        after = sorted(t for t in acknowledged_at if t >= kill)
        gaps = [b - a for a, b in itertools.pairwise([kill, *after])]
        new_leader = fleet.wait_for_one_leader()
        return {
            "signal": how.name,
            "acknowledged_after": len(after),
            "refused": refused,
            "longest_stall_s": round(max(gaps), 2) if gaps else None,
            "first_acknowledged_after_s": round(after[0] - kill, 2) if after else None,
            "new_leader_is_the_other": new_leader != leader,
        }
    finally:
        fleet.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--requests", type=int, default=DEFAULT_REQUESTS)
    parser.add_argument("--clients", type=int, default=DEFAULT_CLIENTS)
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    parser.add_argument("--baseline", type=Path, help="another checkout, run as one instance")
    parser.add_argument("--signal", choices=["kill", "term"], default="kill")
    parser.add_argument("--skip-failover", action="store_true")
    args = parser.parse_args()
    bootstrap = resolve_bootstrap(args.bootstrap, log)
    variants: list[tuple[str, int, Path]] = [("one", 1, REPO_DIR), ("two", 2, REPO_DIR)]
    if args.baseline is not None:
        variants.insert(0, ("baseline", 1, args.baseline.resolve()))
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in variants}
    with tempfile.TemporaryDirectory() as tmp:
        for round_number in range(args.rounds):
            # Alternate the order: a machine that slows down over the run favours neither.
            order = variants if round_number % 2 == 0 else variants[::-1]
            for name, count, tree in order:
                log(f"round {round_number + 1}: {name} ({count} instance(s))")
                with ExitStack() as stack:
                    fleet = Fleet(bootstrap, Path(tmp), count, tree)
                    stack.callback(fleet.stop)
                    runs[name].append(measure(fleet, args.requests, args.clients))
        result: dict[str, Any] = {
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
            "clients": args.clients,
            "runs": runs,
        }
        if not args.skip_failover:
            how = signal.SIGKILL if args.signal == "kill" else signal.SIGTERM
            log(f"failover: the leader gets {how.name}")
            result["failover"] = failover(bootstrap, Path(tmp), args.clients, how)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
