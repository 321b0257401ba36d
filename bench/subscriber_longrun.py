"""Long run of a caught-up subscriber: one package at a time, thousands of commits, with store
maintenance on and off side by side (issue 14 part 2), plus deletion vectors for replacing
commits.

Two subscriber agents (default settings, except maintenance and the retention) follow two
package topics of one embedded SQLite journal and write two Delta tables through one
SparkSession. Every package of the stream (~4 KB pages, 80% new pages and 20% edits of
existing ones) is sent to both topics; each agent imports it (``run_once``: one commit), then
polls once more and finds nothing, which is its idle time: one maintenance step, if one is
due. The order of the two alternates from package to package. Every ``--report-every``
commits, per variant: p50/p95 commit time of that window, active files and their bytes (live
data), files and bytes on disk (table directory, log included), the time of a full listing
(``scd content ls /``, in this process) and the maintenance steps run. At the end both tables
must hold the same nodes as the stream's expected state (checksum).

``--retention-hours`` (default 1, the shortest VACUUM honours) stands in for the 7-day default
so the window passes during the run (after an hour); ``--interval-s`` is the maintenance
interval (time triggers, VACUUM).

Deletion vectors (``--dv-commits``): whether the store's replacing commits can use them, and
what they would change, measured on a copy of the store's schema whose ``path`` column is
renamed (see bench/README.md).

    .venv/bin/python bench/subscriber_longrun.py --commits 500            # ~20 minutes
    nohup .venv/bin/python bench/subscriber_longrun.py > longrun.json 2> longrun.log &

One JSON document goes to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import subscriber_longrun_dv as dv
import subscriber_workload as workload
from subscriber_import import SPARK_MASTER, machine_info, spark_jars
from subscriber_latency import percentile

from journal.api import Journal
from journal.factory import open_journal
from journal.settings import JournalSettings, TopicSettings
from journal.topics import topic_specs
from subscriber.agent import SubscriberAgent
from subscriber.changes import ChangeSet
from subscriber.content import list_tree
from subscriber.delta_store import DeltaStore
from subscriber.rows import KIND_NODE
from subscriber.settings import SubscriberSettings
from subscriber.spark import spark_config

DEFAULT_COMMITS = 5000
DEFAULT_REPORT_EVERY = 500
PACKAGE_BYTES = 4096
MIX = "pages-and-edits"
# The shortest retention VACUUM honours (it rounds to whole hours), for files and log alike.
DEFAULT_RETENTION_HOURS = 1
DEFAULT_INTERVAL_S = 60.0
# The idle poll after each import: long enough for the prefetch to come back empty.
POLL_TIMEOUT_S = 0.05


def log(message: str) -> None:
    print(f"[subscriber_longrun] {message}", file=sys.stderr, flush=True)


@dataclass
class Variant:
    name: str
    agent: SubscriberAgent
    store: DeltaStore
    topic: str
    commit_s: list[float] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    windows: list[dict[str, Any]] = field(default_factory=list)
    reports_seen: int = 0

    def wrap_commit(self) -> None:
        original: Callable[[ChangeSet], None] = self.store.commit

        def commit(changes: ChangeSet) -> None:
            started = time.perf_counter()
            original(changes)
            self.commit_s.append(time.perf_counter() - started)

        setattr(self.store, "commit", commit)  # noqa: B010 -- instance attribute, bench only


def disk_usage(location: str) -> dict[str, int]:
    files = [p for p in Path(location).rglob("*") if p.is_file()]
    log_dir = Path(location) / "_delta_log"
    in_log = [p for p in files if log_dir in p.parents]
    return {
        "files": len(files),
        "bytes": sum(p.stat().st_size for p in files),
        "parquet_files": sum(1 for p in files if p.suffix == ".parquet" and p not in in_log),
        "log_files": len(in_log),
        "log_bytes": sum(p.stat().st_size for p in in_log),
    }


def make_variant(
    name: str,
    spark: Any,
    journal: Journal,
    journal_settings: JournalSettings,
    work: Path,
    args: argparse.Namespace,
) -> Variant:
    maintained = name != "off"
    settings = SubscriberSettings(
        agent_name=f"longrun-{name}",
        pub_agents=[workload.PUB_AGENT],
        store_path=str(work / f"store-{name}"),
        reset="earliest",
        batch_max=1,
        poll_timeout_s=POLL_TIMEOUT_S,
        spark_master=SPARK_MASTER,
        journal=journal_settings,
        maintenance_enabled=maintained,
        maintenance_retention_hours=args.retention_hours,
        maintenance_log_retention_hours=args.retention_hours,
        maintenance_interval_s=args.interval_s,
        maintenance_target_file_bytes=args.target_file_bytes,
    )
    store = DeltaStore(spark, settings.store_path)
    agent = SubscriberAgent(settings, journal, store)
    return Variant(name, agent, store, journal_settings.topics.package)


def import_one(variant: Variant, offset: int) -> None:
    """Import the package at ``offset`` (one commit), then one idle poll (a maintenance step)."""
    agent = variant.agent
    deadline = time.monotonic() + 300
    while agent.processed_offset < offset:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{variant.name}: offset {offset} not imported")
        agent.run_once()
    agent.run_once()  # finds nothing: idle


def window(variant: Variant, spark: Any, started: int, elapsed_s: float) -> dict[str, Any]:
    commits = variant.commit_s[started:]
    kinds = variant.kinds[started:]
    stats = variant.store.file_stats()
    maintenance = variant.agent.bookkeeping.maintenance
    reports = list(maintenance.reports)[variant.reports_seen :]  # unbounded: see longrun()
    variant.reports_seen = len(maintenance.reports)
    listed = time.perf_counter()
    entries = list_tree(DeltaStore(spark, variant.store.location), "/")
    ls_s = time.perf_counter() - listed
    disk = disk_usage(variant.store.location)
    steps: dict[str, dict[str, Any]] = {}
    for report in reports:
        entry = steps.setdefault(report.step, {"runs": 0, "max_s": 0.0, "bytes_reclaimed": 0})
        entry["runs"] += 1
        entry["max_s"] = max(entry["max_s"], report.seconds)
        entry["bytes_reclaimed"] += report.bytes_reclaimed
    by_kind: dict[str, list[float]] = {}
    for seconds, kind in zip(commits, kinds, strict=True):
        by_kind.setdefault(kind, []).append(seconds)
    return {
        "commits": len(variant.commit_s),
        "elapsed_s": round(elapsed_s, 1),
        "commit_p50_s": round(statistics.median(commits), 3),
        "commit_p95_s": round(percentile(commits, 95), 3),
        "commit_p50_s_by_kind": {k: round(statistics.median(v), 3) for k, v in by_kind.items()},
        "active_files": stats.files,
        "live_bytes": stats.bytes,
        "disk": disk,
        "disk_to_live": round(disk["bytes"] / max(1, stats.bytes), 2),
        "ls_s": round(ls_s, 3),
        "ls_entries": len(entries),
        "maintenance_steps": steps,
    }


def longrun(spark: Any, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    stream = workload.build(args.commits, MIX, seed=args.seed, size=PACKAGE_BYTES)
    names = ["on", "off"]
    prefix = f"longrun-{uuid.uuid4().hex[:8]}"
    settings = {
        name: JournalSettings(
            backend="sqlite",
            sqlite_path=work / "journal.db",
            topics=TopicSettings(
                package=f"{prefix}-{name}.package",
                status=f"{prefix}-{name}.status",
                discovery=f"{prefix}-{name}.discovery",
                command=f"{prefix}-{name}.command",
                event=f"{prefix}-{name}.event",
            ),
        )
        for name in names
    }
    with open_journal(settings["on"]) as journal:
        for js in settings.values():
            journal.create_topics(topic_specs(js))
        variants = [make_variant(n, spark, journal, settings[n], work, args) for n in names]
        for v in variants:
            v.wrap_commit()
            v.agent.bookkeeping.maintenance.reports = deque()  # every run, not the last 100
            v.agent.open()
        started = time.perf_counter()
        offsets: list[int] = []
        window_start = 0
        for i, planned in enumerate(stream.packages):
            value, headers = workload.package_message(planned)
            order = variants if i % 2 == 0 else variants[::-1]
            for v in order:
                offset = journal.send(v.topic, value, headers=headers)
                if v is order[0]:
                    offsets.append(offset)
                import_one(v, offset)
                v.kinds.extend([planned.kind] * (len(v.commit_s) - len(v.kinds)))
            done = i + 1
            if done % args.report_every == 0 or done == len(stream.packages):
                elapsed = time.perf_counter() - started
                for v in variants:
                    v.windows.append(window(v, spark, window_start, elapsed))
                window_start = len(variants[0].commit_s)
                log(f"{done} packages: " + json.dumps({v.name: v.windows[-1] for v in variants}))
        for v in variants:
            v.agent.stop()
        expected = workload.expected_digest(workload.expected_state(stream, offsets))
        result: dict[str, Any] = {"packages": len(stream.packages), "counts": stream.counts()}
        for v in variants:
            digest = workload.table_digest(
                spark, v.store.location, node_filter=f"kind = '{KIND_NODE}'"
            )
            first, last = v.windows[0], v.windows[-1]
            result[v.name] = {
                "windows": v.windows,
                "content_ok": digest["nodes"] == expected["nodes"]
                and digest["sha256"] == expected["sha256"],
                "p50_last_to_first": round(last["commit_p50_s"] / first["commit_p50_s"], 2),
            }
        return result


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=DEFAULT_COMMITS)
    parser.add_argument("--report-every", type=int, default=DEFAULT_REPORT_EVERY)
    parser.add_argument("--retention-hours", type=int, default=DEFAULT_RETENTION_HOURS)
    parser.add_argument("--interval-s", type=float, default=DEFAULT_INTERVAL_S)
    parser.add_argument(
        "--target-file-bytes",
        type=int,
        default=SubscriberSettings().maintenance_target_file_bytes,
        help="compaction target of the maintained variant",
    )
    parser.add_argument("--dv-commits", type=int, default=dv.DEFAULT_COMMITS)
    parser.add_argument("--skip-longrun", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work-dir", default=None, help="parent of the temporary stores")
    parser.add_argument("--keep-work-dir", action="store_true")
    return parser.parse_args(argv)


def session(work: Path) -> Any:
    from pyspark.sql import SparkSession

    probe = SubscriberSettings(spark_master=SPARK_MASTER, spark_jars=spark_jars())
    builder = SparkSession.builder.master(SPARK_MASTER).appName("scd-bench-longrun")
    for key, value in {
        **spark_config(probe),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.warehouse.dir": str(work / "warehouse"),
    }.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    report: dict[str, Any] = {"benchmark": "subscriber_longrun", "machine": machine_info()}
    report["settings"] = {
        "commits": args.commits,
        "package_bytes": PACKAGE_BYTES,
        "mix": workload.MIXES[MIX],
        "retention_hours": args.retention_hours,
        "interval_s": args.interval_s,
        "target_file_bytes": args.target_file_bytes,
        "defaults": {
            name: getattr(SubscriberSettings(), name)
            for name in (
                "purge_every_commits",
                "maintenance_compact_min_files",
                "maintenance_target_file_bytes",
            )
        },
    }
    work = Path(tempfile.mkdtemp(prefix="scd-bench-longrun-", dir=args.work_dir))
    started = time.perf_counter()
    # The JVM prints VACUUM's counts to stdout: it gets stderr, the JSON document stdout.
    sys.stdout.flush()
    stdout = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    spark = session(work)
    try:
        if args.dv_commits:
            report["deletion_vectors"] = dv.evaluate(spark, work, args.dv_commits, log)
        if not args.skip_longrun:
            report["longrun"] = longrun(spark, work, args)
    finally:
        spark.stop()
        if not args.keep_work_dir:
            shutil.rmtree(work, ignore_errors=True)
    report["machine"]["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
    report["elapsed_s"] = round(time.perf_counter() - started, 1)
    json.dump(report, stdout, indent=2)
    print(file=stdout)
    stdout.flush()
    ok = all(report.get("longrun", {}).get(n, {}).get("content_ok", True) for n in ("on", "off"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
