"""Memory of several subscriber agents in one daemon against one daemon per agent.

``scd subscriber`` runs with an agents file of 1, 3 and 10 agents (each its own small Delta
store on local disk), all importing the same ``--packages`` packages (~5 KB, mixed adds,
updates and deletes) from a fresh Kafka topic, from ``earliest``. Once every agent holds the
last offset and the daemon is ready, the resident memory of its process tree (Python and its
Spark JVM) is sampled for ``--settle-s`` seconds; the largest sample counts. The one-agent
run is what one daemon per agent costs each, so N separate processes cost N times it (not
started side by side here: N JVMs at once on 2 cores measure the machine, not the design).

    .venv/bin/python -m bench.subscriber_agents       # 1, 3, 10 agents; JSON on stdout
    .venv/bin/python -m bench.subscriber_agents --agents 1,3 --packages 20

Needs Kafka (SCD_TEST_KAFKA_BOOTSTRAP, or deploy/kafka.sh) and Java. Progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from bench import subscriber_workload as workload
from bench.kafka_broker import resolve_bootstrap
from bench.local import spark_jars
from journal.factory import open_journal
from journal.settings import JournalSettings, TopicSettings
from journal.topics import topic_specs
from tests.services import free_port

REPO_DIR = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024
PAGE = os.sysconf("SC_PAGE_SIZE")
# A JVM start, the stores' claims and the import on a loaded 2-core machine.
READY_TIMEOUT_S = 600.0


def log(message: str) -> None:
    print(f"[subscriber_agents] {message}", file=sys.stderr, flush=True)


def tree(root: int) -> list[int]:
    """``root`` and its descendants (the Spark JVM is a child of the Python process)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    out, pending = [], [root]
    while pending:
        pid = pending.pop()
        out.append(pid)
        pending.extend(children.get(pid, []))
    return out


def memory(pid: int) -> dict[str, float]:
    """RSS and PSS of one process, MiB, and its command name."""
    try:
        rss = int((Path(f"/proc/{pid}/statm")).read_text().split()[1]) * PAGE
        pss = 0
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = int(line.split()[1]) * 1024
        return {"rss": rss / MIB, "pss": pss / MIB}
    except OSError:
        return {"rss": 0.0, "pss": 0.0}


def sample(root: int) -> dict[str, float]:
    pids = tree(root)
    python, jvm = memory(root), {"rss": 0.0, "pss": 0.0}
    for pid in pids[1:]:
        for key, value in memory(pid).items():
            jvm[key] += value
    return {
        "python_rss_mib": python["rss"],
        "jvm_rss_mib": jvm["rss"],
        "total_rss_mib": python["rss"] + jvm["rss"],
        "total_pss_mib": python["pss"] + jvm["pss"],
    }


def get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def run_daemon(
    agents: int, journal: JournalSettings, last: int, work: Path, jars: list[str], settle_s: float
) -> dict[str, Any]:
    stores = work / f"agents-{agents}"
    stores.mkdir()
    agents_file = stores / "agents.toml"
    agents_file.write_text(
        "".join(
            f'[[agent]]\nname = "bench-{i}"\nstore_path = "{stores / f"store-{i}"}"\n'
            for i in range(agents)
        )
    )
    port = free_port()
    topics = journal.topics
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCD_")}
    env.update(
        {
            "PYTHONPATH": str(REPO_DIR),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SCD_JOURNAL_BACKEND": "kafka",
            "SCD_JOURNAL_BOOTSTRAP_SERVERS": journal.bootstrap_servers,
            **{
                f"SCD_JOURNAL_TOPICS__{kind.upper()}": getattr(topics, kind)
                for kind in ("package", "status", "discovery", "command", "event")
            },
            "SCD_SUBSCRIBER_AGENTS_FILE": str(agents_file),
            "SCD_SUBSCRIBER_PUB_AGENTS": workload.PUB_AGENT,
            "SCD_SUBSCRIBER_RESET": "earliest",
            "SCD_SUBSCRIBER_HTTP_PORT": str(port),
            "SCD_SUBSCRIBER_SPARK_JARS": ",".join(jars),
            "SCD_SUBSCRIBER_READY_IDLE_S": "2",
        }
    )
    log_path = stores / "daemon.log"
    started = time.monotonic()
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "scd", "subscriber"],
            env=env,
            cwd=REPO_DIR,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        while True:
            if proc.poll() is not None or time.monotonic() - started > READY_TIMEOUT_S:
                tail = log_path.read_text(errors="replace")[-3000:]
                raise SystemExit(f"{agents} agents: daemon not ready\n{tail}")
            try:
                _, health = get(f"http://127.0.0.1:{port}/health")
                status, _ = get(f"http://127.0.0.1:{port}/ready")
                done = all(a["processedOffset"] == last for a in health["agents"])
                if done and status == 200:
                    break
            except (OSError, KeyError, ValueError):
                pass
            time.sleep(0.5)
        ready_s = time.monotonic() - started
        log(f"{agents} agents: all imported {last + 1} records and ready after {ready_s:.1f} s")
        samples = []
        end = time.monotonic() + settle_s
        while time.monotonic() < end:
            samples.append(sample(proc.pid))
            time.sleep(1.0)
        peak = max(samples, key=lambda s: s["total_rss_mib"])
        _, health = get(f"http://127.0.0.1:{port}/health")
        threads = sum(1 for _ in Path(f"/proc/{proc.pid}/task").iterdir())
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return {
        "agents": agents,
        "start_to_ready_s": round(ready_s, 1),
        **{k: round(v, 1) for k, v in peak.items()},
        "rss_per_agent_mib": round(peak["total_rss_mib"] / agents, 1),
        "python_threads": threads,
        "states": sorted({a["state"] for a in health["agents"]}),
        "exit_code": proc.returncode,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default="1,3,10", help="agent counts, comma-separated")
    parser.add_argument("--packages", type=int, default=100)
    parser.add_argument("--settle-s", type=float, default=10.0)
    parser.add_argument("--bootstrap", default=None)
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.agents.split(",")]
    bootstrap = resolve_bootstrap(args.bootstrap, log)
    prefix = f"bench-agents-{uuid.uuid4().hex[:8]}"
    journal = JournalSettings(
        backend="kafka",
        bootstrap_servers=bootstrap,
        topics=TopicSettings.model_validate(
            {k: f"{prefix}.{k}" for k in ("package", "status", "discovery", "command", "event")}
        ),
    )
    stream = workload.build(args.packages, "mixed")
    with open_journal(journal) as client:
        client.create_topics(topic_specs(journal))
        pending = []
        for planned in stream.packages:
            value, headers = workload.package_message(planned)
            pending.append(client.start_send(journal.topics.package, value, headers=headers))
        last = max(client.finish_send(p) for p in pending)
    jars = spark_jars()
    runs = []
    with tempfile.TemporaryDirectory(prefix="scd-bench-agents-") as tmp:
        for count in counts:
            runs.append(run_daemon(count, journal, last, Path(tmp), jars, args.settle_s))
    single = next((r for r in runs if r["agents"] == 1), None)
    for run in runs:
        if single is not None:
            separate = single["total_rss_mib"] * run["agents"]
            run["separate_processes_rss_mib"] = round(separate, 1)
            run["saved_share"] = round(1 - run["total_rss_mib"] / separate, 3)
    print(
        json.dumps(
            {
                "benchmark": "subscriber_agents",
                "packages": args.packages,
                "load_avg_1m_at_start": round(os.getloadavg()[0], 2),
                "cpus": os.cpu_count(),
                "runs": runs,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
