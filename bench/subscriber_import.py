"""Subscriber import benchmark: the scd subscriber agent next to a plain Spark Structured
Streaming job, on the same topic, the same Spark session and the same machine, in one run.

1. Throughput: N packages of ~5 KB are written once to a fresh package topic; then, round by
   round with the order alternating, (a) the scd subscriber agent imports all of them into a
   fresh Delta table (``run_once`` until the last offset is processed) and (b) the baseline
   job (bench/subscriber_baseline.py) does the same with foreachBatch + MERGE. Every table is
   checked against the state the package stream must lead to (node count and checksum).
2. Latency: packages published at a low steady rate to a running agent and, the same way, to
   the baseline's query kept standing (trigger processingTime="0 seconds"); publish→imported
   p50/p99 for packages that add new paths and for packages that update existing ones, side
   by side, and the time of one small Delta commit measured in between.

    .venv/bin/python -m bench.subscriber_import                                   # full run
    .venv/bin/python -m bench.subscriber_import --packages 200 --latency-seconds 10  # smoke run

One JSON document goes to stdout, progress to stderr. See bench/README.md.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.metadata
import json
import logging
import math
import os
import platform
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka

from bench import subscriber_baseline as baseline
from bench import subscriber_latency as latency
from bench import subscriber_workload as workload
from bench.kafka_broker import resolve_bootstrap
from bench.local import LOOPBACK_DRIVER, spark_jars
from journal.api import Journal
from journal.kafka.journal import KafkaJournal
from journal.settings import JournalSettings, TopicSettings
from journal.topics import topic_specs
from subscriber.agent import SubscriberAgent
from subscriber.settings import SubscriberSettings
from subscriber.spark import spark_session
from subscriber.store.delta import DeltaStore

REPO_DIR = Path(__file__).resolve().parent.parent

DEFAULT_PACKAGES = 10_000
DEFAULT_ROUNDS = 1
# Packages imported by every variant before anything is measured: loads Spark's, Delta's and
# the Kafka source's classes and warms the JIT, so the variant that runs first is not penalized.
DEFAULT_WARMUP_PACKAGES = 200
DEFAULT_LATENCY_RATE = 10.0
DEFAULT_LATENCY_SECONDS = 60.0
# Small reference commits, spread before, between and after the latency variants.
DEFAULT_SMALL_COMMITS = 10
# Targets: scd imports >= 3x the baseline's packages/s and >= 1,000 packages/s; at a low rate
# its p50 publish->imported latency is <= 0.5x the baseline's standing query's, and (the
# earlier reference) <= 1.3x one small Delta commit.
THROUGHPUT_TARGET = 3.0
THROUGHPUT_MIN_RATE = 1000.0
LATENCY_BASELINE_TARGET = 0.5
LATENCY_TARGET = 1.3
# Progress reports a streaming query keeps: more than any run here has micro-batches.
PROGRESS_REPORTS_KEPT = 100_000
# Profile rows kept in the JSON (sorted by cumulative and by own time).
PROFILE_ROWS = 25
# Spark session: what subscriber/spark.py gives a subscriber with default settings (local[2],
# 2 shuffle partitions), bound to the loopback interface.
SPARK_MASTER = "local[2]"


VARIANT_NOTES = {
    "scd": "SubscriberAgent (default settings, reset=earliest) run_once() until the last "
    "offset is processed; timed from construction (fresh table created by open()) to the end",
    "baseline_collect": "readStream kafka (startingOffsets=earliest, maxOffsetsPerTrigger, "
    "trigger availableNow) + foreachBatch: collect to the driver, decode (journal.wire), last "
    "write per path, one MERGE keyed by path with txnAppId/txnVersion=batchId; timed from "
    "table creation to query termination",
    "baseline_udf": "the same query, decoding in a Python UDF on the executors and keeping the "
    "last write per path with a window before the MERGE",
    "latency": "end of the store commit holding the package - PackageMessage.created_ms (set at "
    "send), agent running in its own threads (start()), packages sent one by one at the rate",
    "latency_baseline": "the baseline query kept standing (trigger processingTime='0 seconds', "
    "the same foreachBatch body), packages sent the same way: end of the MERGE of the "
    "micro-batch that read the package - PackageMessage.created_ms",
    "small_commit": "append of one ~5 KB node row to a Delta table with the store's schema "
    "(unpartitioned, rows handed to Spark as Arrow, as the store's); small MERGE: one "
    "such row merged by path",
}


def log(message: str) -> None:
    print(f"[subscriber_import] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------- environment


def java_version() -> str:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    except OSError:
        return "unknown"
    return out.stderr.splitlines()[0] if out.stderr else "unknown"


def machine_info() -> dict[str, Any]:
    mem_gb = None
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        mem_gb = round(pages / 1024**3, 1)
    except (ValueError, OSError):
        pass
    return {
        "cpu_count": os.cpu_count(),
        "memory_gb": mem_gb,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "java": java_version(),
        "pyspark": importlib.metadata.version("pyspark"),
        "delta_spark": importlib.metadata.version("delta-spark"),
        "confluent_kafka": importlib.metadata.version("confluent-kafka"),
        "librdkafka": confluent_kafka.libversion()[0],
        "load_avg_1m_at_start": round(os.getloadavg()[0], 2),
    }


def journal_settings(bootstrap: str, prefix: str) -> JournalSettings:
    return JournalSettings(
        backend="kafka", bootstrap_servers=bootstrap, topics=prefixed_topics(prefix)
    )


def prefixed_topics(prefix: str) -> TopicSettings:
    """The topics ``prefix.package``, ``prefix.status``, ... of one bench run."""
    return TopicSettings(
        package=f"{prefix}.package",
        status=f"{prefix}.status",
        discovery=f"{prefix}.discovery",
        command=f"{prefix}.command",
        event=f"{prefix}.event",
    )


@dataclass
class Env:
    bootstrap: str
    jars: list[str]
    work_dir: Path
    journal: KafkaJournal
    spark: Any
    topics: list[str]

    def fresh_topics(self, what: str) -> JournalSettings:
        settings = journal_settings(self.bootstrap, f"bench-sub-{what}-{uuid.uuid4().hex[:8]}")
        specs = topic_specs(settings)
        self.journal.create_topics(specs)
        self.topics.extend(s.name for s in specs)
        return settings

    def subscriber(self, journal: JournalSettings, store: str) -> SubscriberSettings:
        """Default subscriber settings, except: reads the topic from its start."""
        return SubscriberSettings(
            agent_name=f"bench-{uuid.uuid4().hex[:8]}",
            pub_agents=[workload.PUB_AGENT],
            store_path=store,
            reset="earliest",
            spark_master=SPARK_MASTER,
            spark_jars=self.jars,
            journal=journal,
        )

    def table(self, name: str) -> str:
        return str(self.work_dir / f"{name}-{uuid.uuid4().hex[:8]}")


def local_session(
    work: Path, app_name: str, extra: dict[str, str] | None = None, log_level: str = "ERROR"
) -> Any:
    """The benchmarks' local SparkSession: the subscriber's Spark settings (Delta, jars), bound
    to the loopback interface, its warehouse under ``work``."""
    probe = SubscriberSettings(spark_master=SPARK_MASTER, spark_jars=spark_jars(kafka=True))
    warehouse = {"spark.sql.warehouse.dir": str(work / "warehouse")}
    spark = spark_session(probe, app_name, extra={**LOOPBACK_DRIVER, **warehouse, **(extra or {})})
    spark.sparkContext.setLogLevel(log_level)
    return spark


@contextmanager
def environment(args: argparse.Namespace) -> Iterator[Env]:
    bootstrap = resolve_bootstrap(args.bootstrap, log)
    jars = spark_jars(kafka=True)
    work_dir = Path(tempfile.mkdtemp(prefix="scd-bench-sub-", dir=args.work_dir))
    # Python workers (the baseline's UDF decoder) must run this interpreter, which has scd's
    # dependencies; pyspark takes it from the environment when the SparkContext starts.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    log("starting Spark")
    spark = local_session(
        work_dir,
        "scd-bench-subscriber",
        {
            "spark.ui.showConsoleProgress": "false",
            # Every micro-batch's progress report is read back (Spark keeps the last 100).
            "spark.sql.streaming.numRecentProgressUpdates": str(PROGRESS_REPORTS_KEPT),
        },
        log_level="WARN",
    )
    journal = KafkaJournal(bootstrap)
    env = Env(bootstrap, jars, work_dir, journal, spark, [])
    try:
        yield env
    finally:
        if env.topics:
            for future in journal.admin.delete_topics(env.topics).values():
                try:
                    future.result()
                except Exception as exc:  # best effort: a leftover topic is harmless
                    log(f"could not delete a topic: {exc}")
        journal.close()
        spark.stop()
        if not args.keep_work_dir:
            shutil.rmtree(work_dir, ignore_errors=True)


# ---------------------------------------------------------------------- throughput
def send_all(journal: Journal, topic: str, stream: workload.Workload) -> list[int]:
    pending = []
    for planned in stream.packages:
        value, headers = workload.package_message(planned)
        pending.append(journal.start_send(topic, value, headers=headers))
    return [journal.finish_send(p) for p in pending]


def machine_cpu_seconds() -> float:
    """CPU seconds the machine's cores have spent so far, outside idle and I/O wait (from
    /proc/stat): over a run on a quiet machine, what the run cost, the Kafka broker and the
    Spark JVM included, whichever thread or process spent it."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def profile_rows(profiler: cProfile.Profile, sort: str) -> list[str]:
    stats = pstats.Stats(profiler)
    entries: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    index = 3 if sort == "cumulative" else 2
    top = sorted(entries.items(), key=lambda e: e[1][index], reverse=True)[:PROFILE_ROWS]
    rows = []
    for (file, line, func), (_cc, calls, own, cumulative, _callers) in top:
        where = file.replace(str(REPO_DIR) + "/", "").split("site-packages/")[-1]
        rows.append(
            f"{cumulative:8.2f} cum {own:8.2f} own {calls:9d} calls  {where}:{line}({func})"
        )
    return rows


def run_scd(env: Env, journal: JournalSettings, last: int, profile: bool) -> dict[str, Any]:
    store = env.table("scd")
    settings = env.subscriber(journal, store)
    profiler = cProfile.Profile() if profile else None
    started = time.perf_counter()
    agent = SubscriberAgent(settings, env.journal, DeltaStore(env.spark, settings.store_path))
    agent.open()
    opened = time.perf_counter()
    progress_at = opened
    if profiler is not None:
        profiler.enable()
    try:
        while agent.processed_offset < last:
            if agent.run_once():
                progress_at = time.perf_counter()
            elif time.perf_counter() - progress_at > baseline.STALL_TIMEOUT_S:
                raise RuntimeError(f"scd: stuck at offset {agent.processed_offset} of {last}")
    finally:
        if profiler is not None:
            profiler.disable()
        ended = time.perf_counter()
        agent.stop()
    commit_s = sum(agent.counters.import_seconds)
    result: dict[str, Any] = {
        "seconds": round(ended - started, 3),
        "open_seconds": round(opened - started, 3),
        "loop_seconds": round(ended - opened, 3),
        "commits": agent.counters.commits,
        "commit_seconds": round(commit_s, 3),
        "other_seconds": round(ended - opened - commit_s, 3),
        "store": store,
    }
    if profiler is not None:
        result["profile_cumulative"] = profile_rows(profiler, "cumulative")
        result["profile_own"] = profile_rows(profiler, "own")
    return result


def run_baseline(env: Env, journal: JournalSettings, decoder: str, batch: int) -> dict[str, Any]:
    location = env.table(f"baseline-{decoder}")
    run = baseline.run(
        env.spark,
        bootstrap=env.bootstrap,
        topic=journal.topics.package,
        location=location,
        checkpoint=env.table(f"checkpoint-{decoder}"),
        max_offsets_per_trigger=batch,
        decoder=decoder,
    )
    return {
        "seconds": round(run.seconds, 3),
        "stream_seconds": round(run.stream_seconds, 3),
        "batches": run.batches,
        "records": run.records,
        "foreach_batch_seconds": run.foreach_seconds,
        "progress_duration_ms": run.progress_ms,
        "store": location,
    }


def verify(env: Env, run: dict[str, Any], variant: str, expected: dict[str, Any]) -> None:
    location = run.pop("store")
    got = workload.table_digest(env.spark, location)
    run["content"] = got
    run["content_ok"] = got["nodes"] == expected["nodes"] == got["distinct_paths"] and (
        got["sha256"] == expected["sha256"]
    )
    if not run["content_ok"]:
        log(f"{variant}: WRONG CONTENT {got} (expected {expected})")
    shutil.rmtree(location, ignore_errors=True)


def throughput(env: Env, args: argparse.Namespace, decoders: list[str]) -> dict[str, Any]:
    stream = workload.build(args.packages, args.mix, seed=args.seed)
    journal = env.fresh_topics("tp")
    log(f"throughput: writing {args.packages} packages ({args.mix}) to {journal.topics.package}")
    offsets = send_all(env.journal, journal.topics.package, stream)
    expected = workload.expected_digest(workload.expected_state(stream, offsets))
    record_bytes = [len(workload.package_message(p)[0]) for p in stream.packages[:1000]]
    variants = ["scd", *(f"baseline_{d}" for d in decoders)]

    if args.warmup_packages:
        warm = workload.build(args.warmup_packages, args.mix, seed=args.seed + 1)
        warm_journal = env.fresh_topics("warm")
        send_all(env.journal, warm_journal.topics.package, warm)
        log(f"warm-up: {args.warmup_packages} packages through every variant")
        for variant in variants:
            one_run(env, warm_journal, variant, len(warm.packages) - 1, args, profile=False)

    samples: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    for round_no in range(args.rounds):
        order = variants[round_no % len(variants) :] + variants[: round_no % len(variants)]
        for variant in order:
            log(f"throughput round {round_no + 1}/{args.rounds}: {variant}")
            cpu, wall = machine_cpu_seconds(), time.perf_counter()
            run = one_run(env, journal, variant, offsets[-1], args, profile=args.profile)
            cpu, wall = machine_cpu_seconds() - cpu, time.perf_counter() - wall
            verify(env, run, variant, expected)
            run["packages_per_s"] = round(len(offsets) / run["seconds"], 1)
            # Over the whole run (set-up and stop included): CPU seconds, and of the machine's
            # cores (os.cpu_count()) how many were busy on average.
            run["cpu_seconds"] = round(cpu, 1)
            run["cores_busy"] = round(cpu / wall, 2)
            log(f"  {variant}: {run['seconds']} s, {run['packages_per_s']} packages/s")
            samples[variant].append(run)

    def median_rate(variant: str) -> float:
        return float(statistics.median(r["packages_per_s"] for r in samples[variant]))

    result: dict[str, Any] = {
        "packages": len(offsets),
        "mix": args.mix,
        "mix_counts": stream.counts(),
        "mean_package_bytes": round(stream.mean_payload_bytes()),
        "mean_record_bytes": round(statistics.fmean(record_bytes)),
        "expected": expected,
        "rounds": args.rounds,
        "baseline_max_offsets_per_trigger": args.baseline_batch,
    }
    for variant in variants:
        result[variant] = {"packages_per_s_median": median_rate(variant), "runs": samples[variant]}
    strongest = f"baseline_{max(decoders, key=lambda d: median_rate(f'baseline_{d}'))}"
    ratio = median_rate("scd") / median_rate(strongest)
    by_round = [
        s["packages_per_s"] / b["packages_per_s"]
        for s, b in zip(samples["scd"], samples[strongest], strict=True)
    ]

    def median_cpu(variant: str) -> float:
        return float(statistics.median(r["cpu_seconds"] for r in samples[variant]))

    # On cores the runs keep busy, throughput is bounded by CPU work per package: this ratio.
    result["cpu_ratio_baseline_to_scd"] = round(median_cpu(strongest) / median_cpu("scd"), 2)
    result["baseline"] = strongest
    result["ratio_scd_to_baseline"] = round(ratio, 2)
    result["ratio_by_round"] = [round(r, 2) for r in by_round]
    result["ratio_by_round_median"] = round(statistics.median(by_round), 2)
    result["target"] = THROUGHPUT_TARGET
    result["target_met"] = ratio >= THROUGHPUT_TARGET and median_rate("scd") >= THROUGHPUT_MIN_RATE
    result["content_ok"] = all(r["content_ok"] for runs in samples.values() for r in runs)
    return result


def one_run(
    env: Env,
    journal: JournalSettings,
    variant: str,
    last: int,
    args: argparse.Namespace,
    *,
    profile: bool,
) -> dict[str, Any]:
    if variant == "scd":
        return run_scd(env, journal, last, profile)
    return run_baseline(env, journal, variant.removeprefix("baseline_"), args.baseline_batch)


# ---------------------------------------------------------------------- latency
def latency_scd(
    env: Env,
    args: argparse.Namespace,
    variant: str,
    streams: tuple[list[workload.Planned], list[workload.Planned]],
    profiler: cProfile.Profile | None,
) -> dict[str, Any]:
    adds, updates = streams
    journal = env.fresh_topics(f"lat-{variant}")
    settings = env.subscriber(journal, env.table(f"lat-{variant}"))
    result = latency.run_variant(
        variant=variant,
        spark=env.spark,
        journal=env.journal,
        journal_settings=journal,
        settings=settings,
        updates=updates,
        adds=adds,
        rate=args.latency_rate,
        seconds=args.latency_seconds,
        profiler=profiler,
        log=log,
    )
    shutil.rmtree(result.pop("store_path"), ignore_errors=True)
    return result


def latency_baseline(
    env: Env,
    args: argparse.Namespace,
    variant: str,
    decoder: str,
    streams: tuple[list[workload.Planned], list[workload.Planned]],
) -> dict[str, Any]:
    adds, updates = streams
    journal = env.fresh_topics(f"lat-{variant}-{decoder}")
    location = env.table(f"lat-{variant}-{decoder}")
    checkpoint = env.table(f"lat-checkpoint-{variant}-{decoder}")
    try:
        return latency.run_baseline_variant(
            variant=variant,
            spark=env.spark,
            journal=env.journal,
            bootstrap=env.bootstrap,
            topic=journal.topics.package,
            location=location,
            checkpoint=checkpoint,
            decoder=decoder,
            max_offsets_per_trigger=args.baseline_batch,
            updates=updates,
            adds=adds,
            rate=args.latency_rate,
            seconds=args.latency_seconds,
            log=log,
        )
    finally:
        shutil.rmtree(location, ignore_errors=True)
        shutil.rmtree(checkpoint, ignore_errors=True)


def compare_latency(
    result: dict[str, Any], baselines: list[str], small: dict[str, Any]
) -> dict[str, Any]:
    """scd's p50 against the faster baseline's and against one small commit."""
    p50 = result["scd"]["p50_s"]
    fastest = min(baselines, key=lambda b: result[b]["p50_s"])
    ratio = p50 / result[fastest]["p50_s"]
    return {
        "baseline": fastest,
        "ratio_p50_scd_to_baseline": round(ratio, 2),
        "target_met": ratio <= LATENCY_BASELINE_TARGET,
        "ratio_p50_to_small_commit": round(p50 / small["append_s_median"], 2),
        "ratio_p50_to_small_merge": round(p50 / small["merge_s_median"], 2),
        "small_commit_target_met": p50 / small["append_s_median"] <= LATENCY_TARGET,
    }


def latency_part(env: Env, args: argparse.Namespace) -> dict[str, Any]:
    count = max(1, int(args.latency_rate * args.latency_seconds))
    adds = workload.build(
        max(count, latency.UPDATE_PAGES) + latency.ADD_WARMUP_PAGES,
        "inserts-only",
        seed=args.seed + 2,
    )
    updates = workload.update_stream(latency.UPDATE_PAGES, count, seed=args.seed + 3)
    streams = (adds.packages, updates)
    small = latency.SmallCommits(env.spark, env.work_dir, workload.DEFAULT_PACKAGE_BYTES)
    gaps = len(args.latency_variants) + 1
    per_gap = max(2, math.ceil(args.small_commits / gaps))
    small.measure(1)  # first commits to new tables are slower; not counted
    small.append_s.clear()
    small.merge_s.clear()
    result: dict[str, Any] = {
        "rate_per_s": args.latency_rate,
        "seconds": args.latency_seconds,
        "baseline_max_offsets_per_trigger": args.baseline_batch,
    }
    profiler = cProfile.Profile() if args.profile else None
    baselines = [f"baseline_{d}" for d in args.latency_baseline_decoders]
    for number, variant in enumerate(args.latency_variants):
        small.measure(per_gap)
        sides = ["scd", *baselines]
        # The order rotates from variant to variant, as the machine's load drifts.
        sides = sides[number % len(sides) :] + sides[: number % len(sides)]
        result[variant] = {"order": sides}
        for side in sides:
            if side == "scd":
                run = latency_scd(env, args, variant, streams, profiler)
            else:
                decoder = side.removeprefix("baseline_")
                run = latency_baseline(env, args, variant, decoder, streams)
            result[variant][side] = run
            log(f"  latency/{variant}/{side}: {run}")
    small.measure(per_gap)
    result["small_commit"] = small.summary()
    for variant in args.latency_variants:
        result[variant].update(compare_latency(result[variant], baselines, result["small_commit"]))
    result["target_ratio_to_baseline"] = LATENCY_BASELINE_TARGET
    result["target_ratio_to_small_commit"] = LATENCY_TARGET
    if profiler is not None:
        result["profile_cumulative"] = profile_rows(profiler, "cumulative")
        result["profile_own"] = profile_rows(profiler, "own")
    return result


# ---------------------------------------------------------------------- main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="scd subscriber import throughput and latency next to a Spark Structured "
        "Streaming baseline (JSON on stdout)."
    )
    parser.add_argument("--packages", type=int, default=DEFAULT_PACKAGES)
    parser.add_argument("--mix", choices=sorted(workload.MIXES), default="mixed")
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    parser.add_argument("--warmup-packages", type=int, default=DEFAULT_WARMUP_PACKAGES)
    parser.add_argument(
        "--baseline-decoders",
        default="collect,udf",
        help="baseline variants: collect (decode on the driver), udf (Python UDF); "
        "the ratio is taken against the faster one",
    )
    parser.add_argument(
        "--baseline-batch",
        type=int,
        default=SubscriberSettings().batch_max,
        help="maxOffsetsPerTrigger of the baseline (default: the subscriber's batch_max)",
    )
    parser.add_argument("--latency-rate", type=float, default=DEFAULT_LATENCY_RATE)
    parser.add_argument("--latency-seconds", type=float, default=DEFAULT_LATENCY_SECONDS)
    parser.add_argument(
        "--latency-variants",
        default="add,update",
        help="add (new paths), update (existing paths: new versions and scopes)",
    )
    parser.add_argument(
        "--latency-baseline-decoders",
        default="collect,udf",
        help="decoders of the baseline's standing query in the latency part (collect, udf); "
        "scd is compared with the one with the lower p50",
    )
    parser.add_argument("--small-commits", type=int, default=DEFAULT_SMALL_COMMITS)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the scd import loop (adds overhead)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--work-dir", default=None, help="parent of the temporary Delta tables")
    parser.add_argument("--keep-work-dir", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="log the agent's commits")
    args = parser.parse_args(argv)
    args.latency_variants = [v for v in args.latency_variants.split(",") if v]
    if set(args.latency_variants) - {"add", "update"}:
        parser.error("--latency-variants: add, update")
    for flag in ("baseline_decoders", "latency_baseline_decoders"):
        decoders = [d for d in getattr(args, flag).split(",") if d]
        if not decoders or set(decoders) - set(baseline.DECODERS):
            parser.error(f"--{flag.replace('_', '-')}: {', '.join(baseline.DECODERS)}")
        setattr(args, flag, decoders)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.verbose:
        logging.getLogger("subscriber").setLevel(logging.INFO)
    report: dict[str, Any] = {"benchmark": "subscriber_import", "machine": machine_info()}
    started = time.perf_counter()
    with environment(args) as env:
        report["spark"] = {
            "master": SPARK_MASTER,
            "shuffle_partitions": env.spark.conf.get("spark.sql.shuffle.partitions"),
            "same_session_for_all_variants": True,
        }
        defaults = SubscriberSettings()
        report["scd_settings"] = {
            name: getattr(defaults, name)
            for name in ("batch_max", "poll_timeout_s", "purge_every_commits")
        }
        report["variants"] = VARIANT_NOTES
        if not args.skip_throughput:
            report["throughput"] = throughput(env, args, args.baseline_decoders)
        if not args.skip_latency:
            report["latency"] = latency_part(env, args)
    report["machine"]["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
    report["elapsed_s"] = round(time.perf_counter() - started, 1)
    summary: dict[str, Any] = {}
    if "throughput" in report:
        tp = report["throughput"]
        summary["throughput_ratio"] = tp["ratio_scd_to_baseline"]
        summary["throughput_target_met"] = tp["target_met"]
        summary["content_ok"] = tp["content_ok"]
    if "latency" in report:
        for variant in args.latency_variants:
            lat = report["latency"][variant]
            summary[f"latency_{variant}_ratio_to_baseline"] = lat["ratio_p50_scd_to_baseline"]
            summary[f"latency_{variant}_target_met"] = lat["target_met"]
            summary[f"latency_{variant}_ratio_to_small_commit"] = lat["ratio_p50_to_small_commit"]
    report["summary"] = summary
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0 if summary.get("content_ok", True) else 1


if __name__ == "__main__":
    sys.exit(main())
