"""Latency part of the subscriber import benchmark: publish→imported latency at a low, steady
package rate of a running subscriber agent and of the baseline's standing Structured Streaming
query, and the time of one small Delta commit on the same machine in the same run (the floor
any Delta-backed import pays per commit).

Latency of a package = end of the commit that contains it - ``PackageMessage.created_ms`` (set
just before the package is sent). For scd the commit is the agent's ``DeltaStore.commit``
(wrapped), for the baseline the MERGE of the micro-batch that read the package.
"""

from __future__ import annotations

import contextlib
import cProfile
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import subscriber_baseline as baseline
from bench.subscriber_workload import PUB_AGENT, Planned, package_message
from journal.api import Journal
from journal.content.package import Node
from journal.settings import JournalSettings
from runtime.stats import percentile
from subscriber.agent import SubscriberAgent
from subscriber.daemon import fold_worker_of
from subscriber.settings import SubscriberSettings
from subscriber.store.changes import ChangeSet
from subscriber.store.delta import DeltaStore
from subscriber.store.rows import node_row, rows_frame

# Packages the update variant imports before measuring, and then updates round-robin.
UPDATE_PAGES = 50
# New pages the add variant imports before measuring (the first commit to a new table, and a
# query's first micro-batch, are seconds slower than the next ones).
ADD_WARMUP_PAGES = 5
# How long to let a freshly started agent settle (first polls, first announcement).
SETTLE_S = 2.0
# A package not imported this long after the last send fails the run.
DRAIN_TIMEOUT_S = 120.0
# How often the end of a baseline run looks at the query's progress (each look is a call into
# the JVM the query runs in; the latencies come from the query's own commit times).
QUERY_CHECK_S = 0.25
# Percentile of the tail reported with the median.
TAIL_PERCENTILE = 99


@dataclass
class CommitLog:
    """When each offset became imported: the end of the store commit that held it."""

    imported_ms: dict[int, float] = field(default_factory=dict)
    batch_sizes: list[int] = field(default_factory=list)
    commit_seconds: list[float] = field(default_factory=list)

    def wrap(self, agent: SubscriberAgent) -> None:
        original: Callable[[ChangeSet], None] = agent.store.commit

        def commit(changes: ChangeSet) -> None:
            started = time.perf_counter()
            original(changes)
            done_ms = time.time() * 1000
            self.commit_seconds.append(time.perf_counter() - started)
            self.batch_sizes.append(len(changes.units))
            for unit in changes.units:
                self.imported_ms[unit.offset] = done_ms

        setattr(agent.store, "commit", commit)  # noqa: B010 -- instance attribute, bench only


def profiled_run(agent: SubscriberAgent, profiler: cProfile.Profile) -> None:
    """Make the agent's import thread run under ``profiler``."""
    original = agent.loop.run

    def run() -> None:
        profiler.enable()
        try:
            original()
        finally:
            profiler.disable()

    setattr(agent.loop, "run", run)  # noqa: B010 -- instance attribute, bench only


def wait_for(condition: Callable[[], bool], timeout_error: str, every_s: float = 0.01) -> None:
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(timeout_error)
        time.sleep(every_s)


def query_reached(query: Any, topic: str, offset: int) -> Callable[[], bool]:
    """Whether the standing query has processed everything before ``offset``."""

    def reached() -> bool:
        end = baseline.processed_end(query, topic)
        return end is not None and end >= offset

    return reached


def preload(
    journal: Journal, topic: str, variant: str, adds: list[Planned], updates: list[Planned]
) -> tuple[list[Planned], int]:
    """Send what ``variant`` imports before measuring, so the measured packages find a table
    and a reader that have committed once. Returns the packages it measures and the last
    offset sent here. ``add`` sends the last ``ADD_WARMUP_PAGES`` of ``adds`` and measures the
    others (new pages); ``update`` sends the first ``UPDATE_PAGES`` and measures ``updates``
    (rewrites of those pages)."""
    if variant == "add":
        sent, measured = adds[-ADD_WARMUP_PAGES:], adds[:-ADD_WARMUP_PAGES]
    else:
        sent, measured = adds[:UPDATE_PAGES], updates
    pending = []
    for planned in sent:
        value, headers = package_message(planned)
        pending.append(journal.start_send(topic, value, headers=headers))
    return measured, max(journal.finish_send(p) for p in pending)


def publish(
    journal: Journal,
    topic: str,
    measured: list[Planned],
    *,
    rate: float,
    seconds: float,
    log: Callable[[str], None],
    label: str,
) -> dict[int, int]:
    """Send ``rate * seconds`` packages one by one at ``rate``; offset -> created_ms."""
    count = int(rate * seconds)
    created: dict[int, int] = {}
    log(f"latency/{label}: publishing {count} packages at {rate}/s")
    started = time.perf_counter()
    for i in range(count):
        delay = started + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        created_ms = int(time.time() * 1000)
        value, headers = package_message(measured[i % len(measured)], created_ms)
        created[journal.send(topic, value, headers=headers)] = created_ms
    return created


def summarize(
    label: str,
    created: dict[int, int],
    imported_ms: dict[int, float],
    sizes: list[int],
    durations: list[float],
) -> dict[str, Any]:
    """Latency of each package (imported - created) and the commits that held them."""
    missing = [o for o in created if o not in imported_ms]
    if missing:
        raise RuntimeError(f"{label}: offsets {missing[:5]}... never committed")
    latencies = [(imported_ms[o] - c) / 1000 for o, c in created.items()]
    return {
        "packages": len(created),
        "p50_s": round(statistics.median(latencies), 3),
        f"p{TAIL_PERCENTILE}_s": round(percentile(latencies, TAIL_PERCENTILE), 3),
        "mean_s": round(statistics.fmean(latencies), 3),
        "max_s": round(max(latencies), 3),
        "commits": len(sizes),
        "mean_packages_per_commit": round(statistics.fmean(sizes), 2) if sizes else None,
        "commit_s_median": round(statistics.median(durations), 3) if durations else None,
    }


def run_variant(
    *,
    variant: str,
    spark: Any,
    journal: Journal,
    journal_settings: JournalSettings,
    settings: SubscriberSettings,
    updates: list[Planned],
    adds: list[Planned],
    rate: float,
    seconds: float,
    profiler: cProfile.Profile | None,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Publish at ``rate`` for ``seconds`` to an agent running in background threads."""
    topic = journal_settings.topics.package
    measured, ready_at = preload(journal, topic, variant, adds, updates)
    commits = CommitLog()
    stack = contextlib.ExitStack()
    # The store as the daemon makes it: with its fold worker (folds and checkpoints).
    worker = fold_worker_of(settings, spark, stack)
    agent = SubscriberAgent(settings, journal, DeltaStore(spark, settings.store_path, worker))
    commits.wrap(agent)
    if profiler is not None:
        profiled_run(agent, profiler)
    agent.start()
    try:
        wait_for(
            lambda: agent.processed_offset >= ready_at,
            f"{variant}: agent did not catch up with the pre-load",
        )
        time.sleep(SETTLE_S)
        first_commit = len(commits.batch_sizes)
        created = publish(
            journal, topic, measured, rate=rate, seconds=seconds, log=log, label=f"scd/{variant}"
        )
        last = max(created)
        wait_for(
            lambda: agent.processed_offset >= last, f"{variant}: offset {last} not imported in time"
        )
    finally:
        agent.stop()
        stack.close()
    result = summarize(
        f"scd/{variant}",
        created,
        commits.imported_ms,
        commits.batch_sizes[first_commit:],
        commits.commit_seconds[first_commit:],
    )
    result["store_path"] = settings.store_path
    return result


def run_baseline_variant(
    *,
    variant: str,
    spark: Any,
    journal: Journal,
    bootstrap: str,
    topic: str,
    location: str,
    checkpoint: str,
    decoder: str,
    max_offsets_per_trigger: int,
    updates: list[Planned],
    adds: list[Planned],
    rate: float,
    seconds: float,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """The same measurement on the baseline's standing query: a package is imported when the
    MERGE of the micro-batch that read it has committed."""
    label = f"baseline_{decoder}/{variant}"
    measured, ready_at = preload(journal, topic, variant, adds, updates)
    batches = baseline.BatchLog()
    with baseline.standing(
        spark,
        bootstrap=bootstrap,
        topic=topic,
        location=location,
        checkpoint=checkpoint,
        max_offsets_per_trigger=max_offsets_per_trigger,
        decoder=decoder,
        batches=batches,
    ) as query:
        wait_for(
            query_reached(query, topic, ready_at + 1),
            f"{label}: query did not catch up with the pre-load",
            QUERY_CHECK_S,
        )
        time.sleep(SETTLE_S)
        created = publish(
            journal, topic, measured, rate=rate, seconds=seconds, log=log, label=label
        )
        last = max(created)
        wait_for(
            query_reached(query, topic, last + 1),
            f"{label}: offset {last} not imported in time",
            QUERY_CHECK_S,
        )
        batch_of = baseline.BatchOfOffset(query, topic)
    imported_ms: dict[int, float] = {}
    sizes: dict[int, int] = {}
    for offset in created:
        batch = batch_of(offset)
        if batch is not None and batch in batches.merged_ms:
            imported_ms[offset] = batches.merged_ms[batch]
            sizes[batch] = sizes.get(batch, 0) + 1
    return summarize(
        label,
        created,
        imported_ms,
        list(sizes.values()),
        [batches.merge_seconds[b] for b in sizes],
    )


# ---------------------------------------------------------------------- reference commits
class SmallCommits:
    """Times one small Delta commit: an append of one ~5 KB node row to a Delta table with the
    store's schema (and, as the reference of the update variant, a MERGE of one such row keyed
    by path). The row reaches Spark the way the store's rows do (``rows_frame``, Arrow): the
    fastest way this machine has, so the reference is a floor, not a straw man."""

    def __init__(self, spark: Any, work_dir: Path, row_bytes: int) -> None:
        from delta.tables import DeltaTable

        self.spark = spark
        self.row_bytes = row_bytes
        suffix = uuid.uuid4().hex[:8]
        self.append_path = str(work_dir / f"small-append-{suffix}")
        self.merge_path = str(work_dir / f"small-merge-{suffix}")
        for path in (self.append_path, self.merge_path):
            rows_frame(spark, self._rows(0)).write.format("delta").save(path)
        self._table = DeltaTable.forPath(spark, self.merge_path)
        self.append_s: list[float] = []
        self.merge_s: list[float] = []

    def _rows(self, i: int) -> list[tuple[Any, ...]]:
        node = Node(path=f"/content/small/node-{i % 4}")  # merges update, appends add
        node.properties["text"].string_value = "x" * self.row_bytes
        return [node_row(node, i, f"small-{i}", PUB_AGENT, int(time.time() * 1000))]

    def measure(self, count: int) -> None:
        for i in range(count):
            started = time.perf_counter()
            rows_frame(self.spark, self._rows(i)).write.format("delta").mode("append").save(
                self.append_path
            )
            self.append_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            source = rows_frame(self.spark, self._rows(i))
            (
                self._table.alias("t")
                .merge(source.alias("s"), "t.kind = 'node' AND s.kind = 'node' AND t.path = s.path")
                .whenMatchedUpdateAll()
                .whenNotMatchedInsertAll()
                .execute()
            )
            self.merge_s.append(time.perf_counter() - started)

    def summary(self) -> dict[str, Any]:
        return {
            "row_bytes": self.row_bytes,
            "append_s_median": round(statistics.median(self.append_s), 3),
            "append_s": [round(s, 3) for s in self.append_s],
            "merge_s_median": round(statistics.median(self.merge_s), 3),
            "merge_s": [round(s, 3) for s in self.merge_s],
        }
