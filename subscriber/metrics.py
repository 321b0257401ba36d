"""Prometheus metrics of one subscriber agent (Sling's subscriber metrics under an ``scd_``
prefix), plus lag, batch size and processed offset.

Each agent owns its registry, so several agents in one process (embedded mode, tests) never
collide; every series carries the subscriber agent name as label ``agent``, so a Prometheus
server scraping many subscribers can tell them apart and aggregate them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from runtime.supervisor import register_metrics as register_thread_metrics

# Package sizes: DELETE/TEST packages are a few hundred bytes, typical ADDs < 10 KB, and the
# inline limit is 800 KiB (819200, its own bucket edge, so inline and spilled packages separate);
# spilled packages reach tens of MiB.
SIZE_BUCKETS = (
    256,
    1024,
    4096,
    16384,
    65536,
    262144,
    819200,
    4 * 1024 * 1024,
    16 * 1024 * 1024,
    64 * 1024 * 1024,
)
# Import durations (fetch, Spark job, Delta commit): a small Delta commit on local disk takes a
# few hundred ms, a MERGE of a large batch or a commit to S3 several seconds; a minute or two
# means trouble (a stuck job, a slow object store).
IMPORT_DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0)
# Publish -> imported: about a second when caught up; 120 s is Sling's "recent enough" age;
# 900 s is the longest retry back-off; hours to a day when a subscriber starts far behind or
# stays blocked on a package.
DISTRIBUTED_DURATION_BUCKETS = (
    0.25,
    0.5,
    1.0,
    2.0,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    900.0,
    3600.0,
    4 * 3600.0,
    24 * 3600.0,
)
# Packages per commit: 1 when caught up, growing by doubling when behind (adaptive batching),
# so powers of two show each step; 1024 is well above any useful batch for one Spark job.
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class SubscriberMetrics:
    """The metrics of subscriber agent ``agent``; the agent records, ``render`` exposes."""

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.registry = CollectorRegistry(auto_describe=True)
        # Process-wide, labelled by thread name only (runtime/supervisor.py).
        register_thread_metrics(self.registry)
        r, label = self.registry, ["agent"]
        self.imported_package_size = Histogram(
            "scd_imported_package_size_bytes",
            "Size of imported packages",
            label,
            buckets=SIZE_BUCKETS,
            registry=r,
        ).labels(agent)
        self.imported_package_duration = Histogram(
            "scd_imported_package_duration_seconds",
            "Time to import one batch of packages: fetch, Spark job and Delta commit",
            label,
            buckets=IMPORT_DURATION_BUCKETS,
            registry=r,
        ).labels(agent)
        self.failed_package_imports = Counter(
            "scd_failed_package_imports", "Failed import attempts", label, registry=r
        ).labels(agent)
        self.permanent_import_errors = Counter(
            "scd_permanent_import_errors",
            "Packages that can never be imported (undecodable, forged, breaking a content "
            "rule): recorded as REMOVED_FAILED without retries",
            label,
            registry=r,
        ).labels(agent)
        self.transient_import_errors = Counter(
            "scd_transient_import_errors",
            "Failed import attempts that a retry may fix (store, journal or blob store "
            "unavailable, a blob missing)",
            label,
            registry=r,
        ).labels(agent)
        self._ignored_commands = Counter(
            "scd_ignored_commands",
            "Commands for this subscriber that it refused, by reason (signature, agent, "
            "beyond-log, unnumbered)",
            ["agent", "reason"],
            registry=r,
        )
        self.import_loop_restarts = Counter(
            "scd_import_loop_restarts",
            "Times the import loop started again from the stored offset after an unexpected error",
            label,
            registry=r,
        ).labels(agent)
        # Lag beyond retention (subscriber/bookkeeper/behind_log.py).
        self.behind_log = Gauge(
            "scd_behind_log",
            "1 while the next offset to import was deleted from the package topic (BEHIND_LOG)",
            label,
            registry=r,
        ).labels(agent)
        self._log_gaps = Counter(
            "scd_log_gaps",
            "Gaps of deleted offsets found before the next offset, by action: stopped "
            "(BEHIND_LOG) or skipped (accepted, recorded in the store)",
            ["agent", "action"],
            registry=r,
        )
        # Replays refused and sequence gaps (subscriber/bookkeeper/sequences.py).
        self._replayed_records = Counter(
            "scd_replayed_records",
            "Records skipped because their sequence number was applied already (a copied or "
            "reordered record), by kind: package or command",
            ["agent", "kind"],
            registry=r,
        )
        self.sequence_gap = Gauge(
            "scd_sequence_gap",
            "1 while a gap in a publisher agent's sequence numbers is reported (SEQUENCE_GAP)",
            label,
            registry=r,
        ).labels(agent)
        self.sequence_gaps = Counter(
            "scd_sequence_gaps",
            "Gaps in a publisher agent's sequence numbers: packages missing from the log",
            label,
            registry=r,
        ).labels(agent)
        self.skipped_gap_offsets = Counter(
            "scd_skipped_gap_offsets",
            "Offsets skipped in accepted gaps: packages deleted before this subscriber read them",
            label,
            registry=r,
        ).labels(agent)
        self.current_retries = Gauge(
            "scd_current_retries", "Retries of the package being imported", label, registry=r
        ).labels(agent)
        # Staged (canary) import (subscriber/bookkeeper/staging.py).
        self.canary_waiting = Gauge(
            "scd_canary_waiting",
            "1 while a package waits for the canaries' statuses (WAITING_FOR_CANARY or "
            "CANARY_FAILED)",
            label,
            registry=r,
        ).labels(agent)
        self.canary_held = Gauge(
            "scd_canary_held",
            "1 while a package a canary failed for good is held (CANARY_FAILED): alert on it",
            label,
            registry=r,
        ).labels(agent)
        self.canary_waits = Counter(
            "scd_canary_waits", "Packages that waited for the canaries' statuses", label, registry=r
        ).labels(agent)
        self.canary_wait_timeouts = Counter(
            "scd_canary_wait_timeouts",
            "Waits for the canaries that lasted the staged wait time (the wait goes on)",
            label,
            registry=r,
        ).labels(agent)
        self._canary_statuses_ignored = Counter(
            "scd_canary_statuses_ignored",
            "Status records naming a canary that did not count, by reason (oversized, agent, "
            "status, offset)",
            ["agent", "reason"],
            registry=r,
        )
        self._unmodelled_content = Counter(
            "scd_unmodelled_content",
            "Items of imported FileVault packages that scd does not model (access control, "
            "node type definitions, sub-packages, ...), left out and reported, by kind",
            ["agent", "kind"],
            registry=r,
        )
        self._package_status_count = Counter(
            "scd_package_status_count",
            "Package statuses sent, by status",
            ["agent", "status"],
            registry=r,
        )
        self.request_distributed_duration = Histogram(
            "scd_request_distributed_duration_seconds",
            "Time from a package's publication to its import by this subscriber",
            label,
            buckets=DISTRIBUTED_DURATION_BUCKETS,
            registry=r,
        ).labels(agent)
        # A gauge, not a histogram: it is measured once per process start, and a gauge shows
        # that one value and the rule that made the agent ready.
        self._readiness_duration = Gauge(
            "scd_readiness_duration_seconds",
            "Time from start until the subscriber became ready, by the rule that made it ready",
            ["agent", "reason"],
            registry=r,
        )
        self.lag = Gauge(
            "scd_lag",
            "Records on the package topic after the processed offset",
            label,
            registry=r,
        ).labels(agent)
        self.batch_size = Histogram(
            "scd_batch_size",
            "Packages imported per Delta commit",
            label,
            buckets=BATCH_SIZE_BUCKETS,
            registry=r,
        ).labels(agent)
        self.processed_offset = Gauge(
            "scd_processed_offset",
            "Last package offset the content store reflects",
            label,
            registry=r,
        ).labels(agent)
        # Store maintenance (subscriber/maintenance/scheduler.py), by step.
        step = ["agent", "step"]
        self._maintenance_runs = Counter(
            "scd_store_maintenance_runs", "Store maintenance steps run", step, registry=r
        )
        self._maintenance_failures = Counter(
            "scd_store_maintenance_failures", "Store maintenance steps failed", step, registry=r
        )
        self._maintenance_seconds = Histogram(
            "scd_store_maintenance_seconds",
            "Duration of one store maintenance step",
            step,
            buckets=IMPORT_DURATION_BUCKETS,
            registry=r,
        )
        self.store_files = Gauge(
            "scd_store_files", "Data files of the store's current version", label, registry=r
        ).labels(agent)
        self.store_scopes = Gauge(
            "scd_store_scopes",
            "Scope rows of the store not folded yet (replaced versions still in the table)",
            label,
            registry=r,
        ).labels(agent)
        self.store_files_deleted = Counter(
            "scd_store_files_deleted", "Files VACUUM deleted from the store", label, registry=r
        ).labels(agent)
        self.store_bytes_reclaimed = Counter(
            "scd_store_bytes_reclaimed", "Bytes VACUUM deleted from the store", label, registry=r
        ).labels(agent)

        # One writer per store (subscriber/writer/role.py).
        self.writer_role = Gauge(
            "scd_store_writer_role",
            "1 while this process writes its store (holds the writer lease), 0 on standby",
            label,
            registry=r,
        ).labels(agent)
        self._writer_role_changes = Counter(
            "scd_store_writer_role_changes",
            "Changes of this process's writer role, by the role it took (active, standby)",
            ["agent", "role"],
            registry=r,
        )

    # ------------------------------------------------------------------ recording helpers
    def package_imported(self, size_bytes: int, created_ms: int, now_ms: int) -> None:
        """One package committed (call once per package of a batch)."""
        self.imported_package_size.observe(size_bytes)
        if created_ms > 0:
            self.request_distributed_duration.observe(max(0, now_ms - created_ms) / 1000)

    def batch_imported(self, packages: int, duration_s: float) -> None:
        """One commit of ``packages`` packages, imported in ``duration_s``."""
        self.batch_size.observe(packages)
        self.imported_package_duration.observe(duration_s)

    def import_failed(self, *, retriable: bool) -> None:
        self.failed_package_imports.inc()
        if retriable:
            self.transient_import_errors.inc()
        else:
            self.permanent_import_errors.inc()

    def log_gap(self, action: str, offsets: int = 0) -> None:
        """A gap before the next offset: ``stopped`` at, or ``skipped`` (``offsets`` of it)."""
        self._log_gaps.labels(self.agent, action).inc()
        self.skipped_gap_offsets.inc(offsets)

    def replayed(self, kind: str) -> None:
        self._replayed_records.labels(self.agent, kind).inc()

    def command_ignored(self, reason: str) -> None:
        self._ignored_commands.labels(self.agent, reason).inc()

    def canary_status_ignored(self, reason: str) -> None:
        self._canary_statuses_ignored.labels(self.agent, reason).inc()

    def unmodelled(self, counts: Mapping[str, int]) -> None:
        for kind, count in counts.items():
            self._unmodelled_content.labels(self.agent, kind).inc(count)

    def status_sent(self, status: str) -> None:
        self._package_status_count.labels(self.agent, status).inc()

    def offsets(self, processed: int, lag: int | None) -> None:
        """``lag``: packages on the log after the processed offset (None: not known)."""
        self.processed_offset.set(processed)
        if lag is not None:
            self.lag.set(lag)

    def maintenance_step(
        self, step: str, seconds: float, files: int | None, deleted: int, reclaimed: int
    ) -> None:
        self._maintenance_runs.labels(self.agent, step).inc()
        self._maintenance_seconds.labels(self.agent, step).observe(seconds)
        if files is not None:
            self.store_files.set(files)
        self.store_files_deleted.inc(deleted)
        self.store_bytes_reclaimed.inc(reclaimed)

    def maintenance_failed(self, step: str) -> None:
        self._maintenance_failures.labels(self.agent, step).inc()

    def writer_role_changed(self, active: bool, role: str) -> None:
        self.writer_role.set(1 if active else 0)
        self._writer_role_changes.labels(self.agent, role).inc()

    def ready(self, reason: str, after_s: float) -> None:
        self._readiness_duration.labels(self.agent, reason).set(after_s)

    def watch_commit_slots(self, slots: Waiters) -> None:
        """Expose the process's commit slots (shared by its agents, so without the ``agent``
        label: the daemon's exposition shows the series once)."""
        self.registry.register(_CommitSlotWaiters(slots))

    def render(self) -> bytes:
        """The registry in Prometheus text exposition format."""
        return generate_latest(self.registry)


class Waiters(Protocol):
    @property
    def waiting(self) -> int: ...


class _CommitSlotWaiters(Collector):
    """How many of the process's agents wait to open or commit their stores
    (subscriber.fleet.commit_slots), read when scraped."""

    def __init__(self, slots: Waiters) -> None:
        self.slots = slots

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(
            "scd_commit_slot_waiters",
            "Agents of this process waiting to open or commit their stores: many for long "
            "means its cores do not keep up with its agents (move some to another process)",
            value=self.slots.waiting,
        )
