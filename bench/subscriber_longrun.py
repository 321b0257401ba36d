"""Long run of a caught-up subscriber: one package at a time, thousands of commits, with store
maintenance on and off side by side.

Two subscriber agents (default settings, except maintenance, its retention and interval) follow
one package topic of an embedded SQLite journal, as two subscribers of one publisher, and write
two Delta tables through one SparkSession. Every package of the stream (~4 KB pages, 80% new
pages and 20% edits of existing ones) is sent once; each agent imports it (``run_once``: one
commit), then polls once more and finds nothing, which is its idle time: one maintenance step,
if one is due. The order of the two alternates from package to package. Every
``--report-every`` commits, per variant: p50/p95 commit time of that window, active files and
their bytes (live data), files and bytes on disk (table directory, log included), the time of a
full listing (``scd content ls /``, in this process) and the maintenance steps run (the agent's
metrics). At the end both tables must hold the same nodes as the stream's expected state
(checksum).

``--retention-minutes`` (default 3) stands in for the 7-day retention of removed files and the
24-hour log retention, so the window passes many times during the run; ``--interval-s`` is the
maintenance interval (VACUUM, time triggers).

    .venv/bin/python -m bench.subscriber_longrun --commits 400 --report-every 100  # ~7 minutes
    nohup .venv/bin/python -m bench.subscriber_longrun > longrun.json 2> longrun.log &

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import subscriber_workload as workload
from bench.subscriber_import import SPARK_MASTER, local_session, machine_info, prefixed_topics
from journal.api import Journal
from journal.factory import open_journal
from journal.settings import JournalSettings
from journal.topics import topic_specs
from runtime.stats import percentile
from subscriber.agent import SubscriberAgent
from subscriber.content import list_tree
from subscriber.maintenance.scheduler import CHECKPOINT, COMPACT, FOLD, PURGE, RETENTION, VACUUM
from subscriber.settings import SubscriberSettings
from subscriber.store.changes import ChangeSet
from subscriber.store.delta import DeltaStore

DEFAULT_COMMITS = 5000
DEFAULT_REPORT_EVERY = 500
PACKAGE_BYTES = 4096
MIX = "pages-and-edits"
VARIANTS = ("on", "off")
# Retention of removed files and of the log: short enough to pass many times within the run
# (the product's default is 7 days and 24 hours).
DEFAULT_RETENTION_MINUTES = 3.0
DEFAULT_INTERVAL_S = 60.0
# The idle poll after each import: long enough for the prefetch to come back empty.
POLL_TIMEOUT_S = 0.05
STEPS = (PURGE, FOLD, CHECKPOINT, RETENTION, COMPACT, VACUUM)


def log(message: str) -> None:
    print(f"[subscriber_longrun] {message}", file=sys.stderr, flush=True)


class TimedStore(DeltaStore):
    """The store, timing each import's commit."""

    def __init__(self, spark: Any, location: str) -> None:
        super().__init__(spark, location)
        self.commit_s: list[float] = []

    def commit(self, changes: ChangeSet) -> None:
        started = time.perf_counter()
        super().commit(changes)
        self.commit_s.append(time.perf_counter() - started)


@dataclass
class Variant:
    name: str
    agent: SubscriberAgent
    store: TimedStore
    kinds: list[str] = field(default_factory=list)  # of each commit
    windows: list[dict[str, Any]] = field(default_factory=list)
    counted: dict[str, float] = field(default_factory=dict)  # maintenance counters so far

    def maintenance_since_last_window(self) -> dict[str, Any]:
        """Steps run, their total seconds and the bytes VACUUM reclaimed since the last
        window (the agent's metrics)."""
        registry = self.agent.metrics.registry
        agent = {"agent": self.agent.settings.agent_name}
        now: dict[str, float] = {}
        for step in STEPS:
            labels = {**agent, "step": step}
            now[f"{step}.runs"] = (
                registry.get_sample_value("scd_store_maintenance_runs_total", labels) or 0.0
            )
            now[f"{step}.seconds"] = (
                registry.get_sample_value("scd_store_maintenance_seconds_sum", labels) or 0.0
            )
            now[f"{step}.failures"] = (
                registry.get_sample_value("scd_store_maintenance_failures_total", labels) or 0.0
            )
        now["bytes_reclaimed"] = (
            registry.get_sample_value("scd_store_bytes_reclaimed_total", agent) or 0.0
        )
        delta = {key: value - self.counted.get(key, 0.0) for key, value in now.items()}
        self.counted = now
        steps = {
            step: {
                "runs": int(delta[f"{step}.runs"]),
                "seconds": round(delta[f"{step}.seconds"], 1),
                "failures": int(delta[f"{step}.failures"]),
            }
            for step in STEPS
            if delta[f"{step}.runs"] or delta[f"{step}.failures"]
        }
        return {"steps": steps, "bytes_reclaimed": int(delta["bytes_reclaimed"])}


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
    retention_hours = args.retention_minutes / 60
    settings = SubscriberSettings(
        agent_name=f"longrun-{name}",
        pub_agents=[workload.PUB_AGENT],
        store_path=str(work / f"store-{name}"),
        reset="earliest",
        batch_max=1,
        poll_timeout_s=POLL_TIMEOUT_S,
        spark_master=SPARK_MASTER,
        journal=journal_settings,
        maintenance_enabled=name == "on",
        maintenance_retention_hours=retention_hours,
        maintenance_log_retention_hours=retention_hours,
        maintenance_interval_s=args.interval_s,
        maintenance_target_file_bytes=args.target_file_bytes,
    )
    store = TimedStore(spark, settings.store_path)
    return Variant(name, SubscriberAgent(settings, journal, store), store)


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
    commits = variant.store.commit_s[started:]
    kinds = variant.kinds[started:]
    stats = variant.store.file_stats()
    listed = time.perf_counter()
    entries = list_tree(DeltaStore(spark, variant.store.location), "/")  # scd content ls /
    ls_s = time.perf_counter() - listed
    disk = disk_usage(variant.store.location)
    by_kind: dict[str, list[float]] = {}
    for seconds, kind in zip(commits, kinds, strict=True):
        by_kind.setdefault(kind, []).append(seconds)
    return {
        "commits": len(variant.store.commit_s),
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
        "maintenance": variant.maintenance_since_last_window(),
    }


def longrun(spark: Any, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Both agents follow one package topic, as two subscribers of one publisher do."""
    stream = workload.build(args.commits, MIX, seed=args.seed, size=PACKAGE_BYTES)
    prefix = f"longrun-{uuid.uuid4().hex[:8]}"
    journal_settings = JournalSettings(
        backend="sqlite",
        sqlite_path=work / "journal.db",
        topics=prefixed_topics(prefix),
    )
    with open_journal(journal_settings) as journal:
        journal.create_topics(topic_specs(journal_settings))
        variants = [make_variant(n, spark, journal, journal_settings, work, args) for n in VARIANTS]
        for v in variants:
            v.agent.open()
        started = time.perf_counter()
        offsets: list[int] = []
        window_start = 0
        for i, planned in enumerate(stream.packages):
            value, headers = workload.package_message(planned)
            offset = journal.send(journal_settings.topics.package, value, headers=headers)
            offsets.append(offset)
            for v in variants if i % 2 == 0 else variants[::-1]:
                import_one(v, offset)
                v.kinds.append(planned.kind)
            done, elapsed = i + 1, time.perf_counter() - started
            late = args.max_minutes is not None and elapsed > args.max_minutes * 60
            if done % args.report_every == 0 or done == len(stream.packages) or late:
                for v in variants:
                    v.windows.append(window(v, spark, window_start, elapsed))
                window_start = done
                log(f"{done} packages: " + json.dumps({v.name: v.windows[-1] for v in variants}))
            if late:
                log(f"stopped after {done} packages: --max-minutes {args.max_minutes}")
                break
        for v in variants:
            v.agent.stop()
        fed = workload.Workload(stream.packages[: len(offsets)])
        expected = workload.expected_digest(workload.expected_state(fed, offsets))
        result: dict[str, Any] = {"packages": len(offsets), "counts": fed.counts()}
        for v in variants:
            digest = workload.table_digest(spark, v.store.location)
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
    parser.add_argument("--retention-minutes", type=float, default=DEFAULT_RETENTION_MINUTES)
    parser.add_argument("--interval-s", type=float, default=DEFAULT_INTERVAL_S)
    parser.add_argument(
        "--target-file-bytes",
        type=int,
        default=SubscriberSettings().maintenance_target_file_bytes,
        help="compaction target of the maintained variant",
    )
    parser.add_argument(
        "--max-minutes",
        type=float,
        help="stop feeding after this long (a loaded machine), with a last report: the result "
        "says how many packages were fed",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work-dir", default=None, help="parent of the temporary stores")
    parser.add_argument("--keep-work-dir", action="store_true")
    return parser.parse_args(argv)


def session(work: Path) -> Any:
    return local_session(work, "scd-bench-longrun")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    report: dict[str, Any] = {"benchmark": "subscriber_longrun", "machine": machine_info()}
    report["settings"] = {
        "commits": args.commits,
        "package_bytes": PACKAGE_BYTES,
        "mix": workload.MIXES[MIX],
        "retention_minutes": args.retention_minutes,
        "interval_s": args.interval_s,
        "target_file_bytes": args.target_file_bytes,
        "defaults": {
            name: getattr(SubscriberSettings(), name)
            for name in (
                "purge_every_commits",
                "maintenance_compact_min_files",
                "maintenance_target_file_bytes",
                "maintenance_fold_growth",
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
