"""Start to serving: how long a new, restarted or clone-seeded subscriber takes to be ready and
answer a content read, phase by phase, next to another revision's code in the same run.

A log of ``--packages`` packages (bench.subscriber_workload, mixed) on Kafka; then, for each
case, ``scd subscriber`` starts and ``--more`` packages are sent the moment it starts:

* ``earliest``: a new store, ``SCD_SUBSCRIBER_RESET=earliest``, the whole log to import;
* ``restart``: the store ``earliest`` left (stopped by SIGTERM), started again;
* ``clone``: a copy of that caught-up store at a new path, a new agent name (an autoscaler's
  new instance).

Measured from the process's start (the bench's ``Popen``): ``ready_s`` (``/ready`` 200),
``read_s`` (``/content`` answers the last page sent at the start, from its offset or a later
one: the new version served), ``stop_s`` (SIGTERM to exit), and the phases the
subscriber reports in ``/health``'s ``start`` (subscriber.start_report; absent in code older
than that report). With ``--baseline REF`` every case runs with REF's code too (a git worktree
of it), alternating, ``--rounds`` times; medians per side, and head / baseline. Readiness uses
the product's own settings, not the tests' (the JIT setting included).

    .venv/bin/python -m bench.subscriber_start --baseline HEAD~5
    .venv/bin/python -m bench.subscriber_start --packages 200 --more 20 --rounds 3

Needs Kafka (SCD_TEST_KAFKA_BOOTSTRAP, or deploy/kafka.sh) and Java. Progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from bench import subscriber_workload as workload
from bench.kafka_broker import resolve_bootstrap
from bench.local import spark_jars
from journal.api import Journal
from journal.factory import open_journal
from journal.settings import JournalSettings, TopicSettings
from journal.topics import topic_specs
from tests.services import free_port

REPO_DIR = Path(__file__).resolve().parent.parent
# A JVM start and the import of the whole log on a loaded 2-core machine.
READY_TIMEOUT_S = 300.0
POLL_S = 0.1
STOP_TIMEOUT_S = 120.0
CASES = ("earliest", "restart", "clone")
KINDS = ("package", "status", "discovery", "command", "event")


def log(message: str) -> None:
    print(f"[subscriber_start] {message}", file=sys.stderr, flush=True)


def send(client: Journal, journal: JournalSettings, stream: workload.Workload) -> int:
    pending = []
    for planned in stream.packages:
        value, headers = workload.package_message(planned)
        pending.append(client.start_send(journal.topics.package, value, headers=headers))
    return max(client.finish_send(p) for p in pending)


class Daemon:
    """One ``scd subscriber`` process of one agent, with the code at ``code``."""

    def __init__(
        self, code: Path, journal: JournalSettings, name: str, store: Path, jars: list[str]
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCD_")}
        env.update(
            {
                "PYTHONPATH": str(code),
                "SPARK_LOCAL_IP": "127.0.0.1",
                "SCD_JOURNAL_BACKEND": "kafka",
                "SCD_JOURNAL_BOOTSTRAP_SERVERS": journal.bootstrap_servers,
                **{f"SCD_JOURNAL_TOPICS__{k.upper()}": getattr(journal.topics, k) for k in KINDS},
                "SCD_SUBSCRIBER_AGENT_NAME": name,
                "SCD_SUBSCRIBER_STORE_PATH": str(store),
                "SCD_SUBSCRIBER_PUB_AGENTS": workload.PUB_AGENT,
                "SCD_SUBSCRIBER_RESET": "earliest",
                "SCD_SUBSCRIBER_HTTP_PORT": str(self.port),
                "SCD_SUBSCRIBER_SPARK_JARS": ",".join(jars),
            }
        )
        self.log_path = store.parent / f"{name}-{uuid.uuid4().hex[:6]}.log"
        self.started = time.monotonic()
        with self.log_path.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "scd", "subscriber"],
                env=env,
                cwd=code,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait(self, page_path: str, offset: int) -> dict[str, Any]:
        """Seconds from the start until ready and until ``page_path`` is read at ``offset``
        or later; the phases."""
        ready_s = read_s = None
        with httpx.Client(timeout=5.0) as http:
            while ready_s is None or read_s is None:
                elapsed = time.monotonic() - self.started
                if self.proc.poll() is not None or elapsed > READY_TIMEOUT_S:
                    tail = self.log_path.read_text(errors="replace")[-3000:]
                    raise SystemExit(f"not serving after {elapsed:.0f} s\n{tail}")
                try:
                    if ready_s is None and http.get(f"{self.url}/ready").status_code == 200:
                        ready_s = time.monotonic() - self.started
                    if read_s is None:
                        read = http.get(f"{self.url}/content{page_path}")
                        if read.is_success and int(read.headers["X-Scd-Offset"]) >= offset:
                            read_s = time.monotonic() - self.started
                except httpx.HTTPError:
                    pass
                time.sleep(POLL_S)
            health = http.get(f"{self.url}/health").json()
        return {
            "ready_s": round(ready_s, 2),
            "read_s": round(read_s, 2),
            "phases": health.get("start", {}),
        }

    def stop(self) -> float:
        """SIGTERM; the seconds until the process left."""
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        return round(time.monotonic() - started, 2)


def newest_page(stream: workload.Workload) -> str:
    """A page the stream leaves in place (its last add or update)."""
    deleted: set[int] = set()
    for planned in reversed(stream.packages):
        if planned.kind == "delete":
            deleted.add(planned.page)
        elif planned.page not in deleted:
            return workload.page_paths(planned.page)[0]
    raise ValueError("the stream deletes every page")


def one_round(
    code: Path,
    side: str,
    journal: JournalSettings,
    client: Journal,
    work: Path,
    jars: list[str],
    more: int,
) -> dict[str, Any]:
    """The three cases with the code at ``code``, each on the store the one before left."""
    base = work / side / uuid.uuid4().hex[:6]
    base.mkdir(parents=True)
    store = base / "store"
    results: dict[str, Any] = {}
    for case in CASES:
        name = f"start-{side}"
        path = store
        if case == "clone":
            path = base / "clone"
            shutil.copytree(store, path)
            name = f"start-{side}-clone"
        extra = workload.build(more, "inserts-only", seed=int(time.time() * 1000) % 100_000)
        daemon = Daemon(code, journal, name, path, jars)
        last = send(client, journal, extra)  # the moment it starts
        result = daemon.wait(newest_page(extra), last)
        result["stop_s"] = daemon.stop()
        results[case] = result
        log(f"{side} {case}: ready {result['ready_s']} s, read {result['read_s']} s")
    return results


def worktree(ref: str, work: Path) -> Path:
    path = work / "baseline"
    subprocess.run(
        ["git", "-C", str(REPO_DIR), "worktree", "add", "--detach", str(path), ref],
        check=True,
        capture_output=True,
    )
    return path


def medians(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for case in CASES:
        each = [r[case] for r in rounds]
        phases = sorted({p for r in each for p in r["phases"]})
        out[case] = {
            key: round(statistics.median(r[key] for r in each), 2)
            for key in ("ready_s", "read_s", "stop_s")
        }
        out[case]["phases"] = {
            p: round(statistics.median(r["phases"][p] for r in each if p in r["phases"]), 2)
            for p in phases
        }
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", type=int, default=200, help="the log before the starts")
    parser.add_argument("--more", type=int, default=20, help="sent as each process starts")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--baseline", default=None, help="a git revision to run beside")
    parser.add_argument("--bootstrap", default=None)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bootstrap = resolve_bootstrap(args.bootstrap, log)
    prefix = f"bench-start-{uuid.uuid4().hex[:8]}"
    journal = JournalSettings(
        backend="kafka",
        bootstrap_servers=bootstrap,
        topics=TopicSettings.model_validate({k: f"{prefix}.{k}" for k in KINDS}),
    )
    jars = spark_jars()
    with (
        tempfile.TemporaryDirectory(prefix="scd-bench-start-") as tmp,
        open_journal(journal) as client,
    ):
        work = Path(tmp)
        client.create_topics(topic_specs(journal))
        send(client, journal, workload.build(args.packages, "mixed"))
        sides = {"head": REPO_DIR}
        if args.baseline:
            sides["baseline"] = worktree(args.baseline, work)
        rounds: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
        try:
            for _ in range(args.rounds):
                for side, code in sides.items():
                    rounds[side].append(
                        one_round(code, side, journal, client, work, jars, args.more)
                    )
        finally:
            if "baseline" in sides:
                subprocess.run(
                    [
                        "git",
                        "-C",
                        str(REPO_DIR),
                        "worktree",
                        "remove",
                        "--force",
                        str(sides["baseline"]),
                    ],
                    check=False,
                )
    result: dict[str, Any] = {
        "benchmark": "subscriber_start",
        "packages": args.packages,
        "more": args.more,
        "rounds": args.rounds,
        "baseline": args.baseline,
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
        "sides": {side: medians(r) for side, r in rounds.items()},
    }
    if "baseline" in rounds:
        head, base = result["sides"]["head"], result["sides"]["baseline"]
        result["head_over_baseline"] = {
            case: {k: round(head[case][k] / base[case][k], 2) for k in ("ready_s", "read_s")}
            for case in CASES
        }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
