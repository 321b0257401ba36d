"""Store maintenance that runs by itself, never in an import's way.

The import loop calls ``Maintenance.step`` when a poll found nothing to import, and after each
commit for the steps of the maintenance thread only (under a steady stream no poll comes back
empty); each call starts at most one step. The purge runs right there, on an idle poll (it
rewrites the files of recent imports, holding the store's commit lock; under a steady stream
it waits for the stream to pause); the fold, the
checkpoint, the compaction and VACUUM's turn (the retention step, then VACUUM) run in the
maintenance thread while imports go on, and nothing else is started until the step in it
ended. None of them can make an import fail: imports are blind appends, none of them deletes a
file an import reads, and the retention step changes the table's properties under the commit
lock. Their Spark work yields cores to the imports' (DeltaStore.in_maintenance_thread,
subscriber/spark_pools.xml), but on a small machine it still shares the CPU with them.
The purge goes first; the due steps of the maintenance thread then take turns, the one started
least recently first (none starves another: on a large store under a steady stream a
checkpoint takes longer than the commits that make the next one due). The steps:

* ``purge``: sent statuses and superseded offset rows are removed (every
  ``purge_every_commits`` commits, and after ``interval_s`` when commits were made since);
* ``fold``: the node versions that later imports replaced are deleted with the scope rows
  that replaced them (up to ``fold_max_scopes`` per run); imports only append, so this is
  where replaced content leaves the table. A fold rewrites nearly every file (replaced
  versions are spread over all of them) and the files it replaced stay for the retention, so
  it runs when the table grew by ``fold_growth`` since the last fold of this process (and at
  least ``fold_min_scopes`` scopes wait): like a log-structured merge, each byte imported is
  rewritten about 1 / ``fold_growth`` times and at most that share of the table is replaced
  versions, whatever the table's size. A fixed number of scopes would instead rewrite the
  whole table every few minutes and keep a copy per fold for the retention (days). It reads
  the whole table (about 12 s on a million-node store alone,
  docs/benchmarks.md#subscriber_bigstore; longer beside imports); it commits with
  ``dataChange = false`` from the version it read, so the imports committed meanwhile do not
  fail it (subscriber.maintenance.rewrites; a MERGE failed beside every import, as the
  table is Serializable). One that fails is tried again after FOLD_RETRY_S;
* ``checkpoint``: a Delta checkpoint once enough commits were made; Delta also deletes log
  entries older than the retention when it writes one;
* ``retention``: the table keeps its log and removed files for the retention (table
  properties, which VACUUM and the log cleanup go by; checked at start and right before each
  VACUUM, in VACUUM's turn, set when they differ);
* ``compact``: the small files merged (subscriber.maintenance.compaction: planned like a fold,
  committed as an OPTIMIZE) once ``compact_min_files`` files are below half ``target_file_bytes``
  (considered after each purge, and after ``interval_s`` for any two small files left);
* ``vacuum``: VACUUM with the retention every ``interval_s``: it deletes only files no version
  within the retention reads and commits nothing (by the fold worker when the store has one).

``purge``, ``fold`` and ``checkpoint`` always run (without them reads slow down with every
commit); the others only when maintenance is enabled. None changes content or offset
(subscriber.maintenance.delta_table), and each commits atomically or not at all, so a crash
during one leaves the store as before it or after it. Each step is logged in one line and
counted (subscriber.metrics); a step of the maintenance thread that fails is logged, counted
(``failures``, ``scd_store_maintenance_failures_total``) and tried again when next due.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass

from subscriber.errors import WriterDeposed
from subscriber.metrics import SubscriberMetrics
from subscriber.settings import SubscriberSettings
from subscriber.store.base import StepOutcome, Store

log = logging.getLogger(__name__)

# The maintenance thread checkpoints the store once this many commits were made since the last
# checkpoint: Delta's default interval, so readers replay no longer a log than with Delta's own
# checkpoints, which the store keeps out of the imports' commits (delta.CHECKPOINT_INTERVAL).
IDLE_CHECKPOINT_COMMITS = 10

REPORTS_KEPT = 100

# The prefix of a maintenance step's thread: one per step, ending with it.
MAINTENANCE_THREAD = "maintenance-"

# A fold that failed is tried again after this long (or after ``interval_s`` if shorter).
FOLD_RETRY_S = 60.0

PURGE, FOLD, CHECKPOINT, RETENTION, COMPACT, VACUUM = (
    "purge",
    "fold",
    "checkpoint",
    "retention",
    "compact",
    "vacuum",
)


@dataclass(frozen=True)
class MaintenancePolicy:
    enabled: bool = True
    retention_s: float = 168 * 3600.0
    log_retention_s: float = 24 * 3600.0
    interval_s: float = 3600.0
    compact_min_files: int = 20
    target_file_bytes: int = 128 * 1024
    purge_every_commits: int = 100
    # A fold is due once the table grew by this share since the last one (see above).
    fold_growth: float = 0.5
    fold_min_scopes: int = 1000
    fold_max_scopes: int = 100_000
    checkpoint_every_commits: int = IDLE_CHECKPOINT_COMMITS

    @classmethod
    def from_settings(cls, settings: SubscriberSettings) -> MaintenancePolicy:
        return cls(
            enabled=settings.maintenance_enabled,
            retention_s=settings.maintenance_retention_hours * 3600,
            log_retention_s=settings.maintenance_log_retention_hours * 3600,
            interval_s=settings.maintenance_interval_s,
            compact_min_files=settings.maintenance_compact_min_files,
            target_file_bytes=settings.maintenance_target_file_bytes,
            purge_every_commits=settings.purge_every_commits,
            fold_growth=settings.maintenance_fold_growth,
        )


class Skipped:
    """What a step returns that found nothing to do (a compaction with too few small files):
    ``_run`` reports nothing for it."""


SKIPPED = Skipped()


@dataclass(frozen=True)
class StepReport:
    step: str
    seconds: float
    files_before: int | None = None
    files_after: int | None = None
    files_deleted: int = 0
    bytes_reclaimed: int = 0

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


class Maintenance:
    def __init__(
        self,
        name: str,
        store: Store,
        policy: MaintenancePolicy,
        metrics: SubscriberMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.store = store
        self.policy = policy
        self.metrics = metrics
        self.clock = clock
        # The last runs, newest last, and how many ran in all (tests, bench).
        self.reports: deque[StepReport] = deque(maxlen=REPORTS_KEPT)
        self.runs = 0
        self.commits = 0  # commits this process made (counted by the import loop)
        self._since_purge = 0
        started = clock()
        self._last = {PURGE: started, COMPACT: started, VACUUM: started}
        self._retention_checked = False  # in this process
        self._compact_check = False  # a purge ran: see whether compaction is due
        self._commits_at_compact = 0
        self._fold_not_before = started
        # Table bytes after this process's last fold (None: none yet, the first one is due on
        # the scope count alone), and the commit count when growth was last looked at.
        self._folded_bytes: int | None = None
        self._commits_at_fold_check = -1
        # The thread of the step started last (fold, checkpoint, compaction or VACUUM).
        self._worker: threading.Thread | None = None
        # Steps started in the maintenance thread, and at which of those starts each step last.
        self._starts = 0
        self._turns: dict[str, int] = {}
        self.failures = 0  # steps of the maintenance thread that failed

    # ------------------------------------------------------------------ commits
    @property
    def commits_since_purge(self) -> int:
        return self._since_purge

    @commits_since_purge.setter
    def commits_since_purge(self, value: int) -> None:
        self.commits += max(0, value - self._since_purge)
        self._since_purge = value

    # ------------------------------------------------------------------ the import loop's calls
    def committed(self) -> None:
        """Count a commit of the import loop, and start a step of the maintenance thread if one
        is due: under a steady stream a poll never comes back empty, and the store would never
        be folded or checkpointed. It never holds the import (the purge and the retention wait
        for an idle poll)."""
        self.commits_since_purge += 1
        self._maintain(inline=False)

    def idle(self) -> None:
        """A poll found nothing to import: one step, if one is due."""
        self._maintain(inline=True)

    def _maintain(self, *, inline: bool) -> None:
        """A failure is logged and tried again later; it never stops the import thread."""
        try:
            self.step(inline=inline)
        except WriterDeposed:
            raise  # the import loop steps down
        except Exception:
            log.warning(
                "%s: store housekeeping failed; trying again later", self.name, exc_info=True
            )

    # ------------------------------------------------------------------ scheduling
    @property
    def busy(self) -> bool:
        """True while a step runs in the maintenance thread."""
        return self._worker is not None and self._worker.is_alive()

    def step(self, *, inline: bool = True) -> StepReport | None:
        """Start a step that is due, if any (the import loop calls this when a poll found
        nothing, and with ``inline`` False after each commit). The purge runs here, only when
        ``inline``, and returns its report; a failing one raises and is tried again after as
        many commits, or ``interval_s``. The others start in the maintenance thread and return
        None (their reports land in ``reports``); nothing is started while one runs."""
        if self.busy:
            return None
        policy, state, now = self.policy, self.store.state, self.clock()
        purge_due = self._since_purge >= policy.purge_every_commits or (
            policy.enabled and now - self._last[PURGE] >= policy.interval_s
        )
        if (
            inline
            and state is not None
            and self._since_purge > 0
            and not state.pending_statuses
            and purge_due
        ):
            return self._purge(state.sent_statuses_up_to)
        fold_due = (
            state is not None
            and state.scopes >= policy.fold_min_scopes
            and now >= self._fold_not_before
            and self._grown()
        )
        # The due steps of the maintenance thread take turns: the one started least recently
        # goes first (ties in this order). Under a steady stream on a large store a checkpoint
        # is due again as soon as one ends (it takes longer than the commits that make it
        # due): by priority alone, compaction and VACUUM would never run.
        checkpoint_due = self.store.commits_since_checkpoint >= policy.checkpoint_every_commits
        due = [CHECKPOINT] if checkpoint_due else []
        if fold_due:
            due.append(FOLD)
        if policy.enabled:
            # VACUUM's turn: the retention step, then VACUUM when due (at start, the retention
            # alone).
            if now - self._last[VACUUM] >= policy.interval_s or not self._retention_checked:
                due.append(VACUUM)
            if self._compact_check or self._compact_timed(now):
                due.append(COMPACT)
        if due:
            self._start(min(due, key=lambda step: self._turns.get(step, -1)), now)
        return None

    def _start(self, step: str, now: float) -> None:
        if step == CHECKPOINT:
            self._background(CHECKPOINT, lambda: self._run(CHECKPOINT, self._checkpoint))
        elif step == FOLD:
            self._start_fold()
        elif step == COMPACT:
            self._start_compact(now)
        else:
            self._start_vacuum(now)

    def run_all(self, *, up_to_status: int = -1) -> list[StepReport]:
        """Every step now, in order, in this thread (``scd content maintain``)."""
        self.wait()
        state = self.store.state
        reports = [self._purge(up_to_status)]
        while state is not None and state.scopes > 0:
            reports.append(self._run(FOLD, self._fold))
        reports += [
            self._run(COMPACT, functools.partial(self._compact, 2)),
            self._run(RETENTION, self._set_retention),
            self._run(CHECKPOINT, self._checkpoint),
            self._run(VACUUM, self.store.vacuum),
        ]
        return [report for report in reports if report is not None]

    def wait(self, timeout_s: float | None = None) -> None:
        """Wait for the step in the maintenance thread, if one runs (at shutdown, tests)."""
        if self._worker is not None:
            self._worker.join(timeout_s)

    def _compact_timed(self, now: float) -> bool:
        return (
            now - self._last[COMPACT] >= self.policy.interval_s
            and self.commits > self._commits_at_compact
        )

    def _start_compact(self, now: float) -> None:
        """Compaction once enough small files wait (the compaction counts them where it is
        planned: listing them is a Spark job). It commits with ``dataChange = false``, as a
        fold does: appends committed meanwhile neither fail it nor fail. One that found too
        few small files is not reported."""
        policy, timed = self.policy, self._compact_timed(now)
        self._compact_check = False
        self._last[COMPACT] = now
        self._commits_at_compact = self.commits
        compact = functools.partial(self._compact, 2 if timed else policy.compact_min_files)
        self._background(COMPACT, lambda: self._run(COMPACT, compact))

    # ------------------------------------------------------------------ steps
    def _purge(self, up_to_status: int) -> StepReport | None:
        self._since_purge = 0
        self._last[PURGE] = self.clock()
        self._compact_check = True

        def purge() -> StepOutcome:
            before = self.store.file_stats().files
            self.store.forget_statuses(up_to_status)
            return StepOutcome(before, self.store.file_stats().files)

        return self._run(PURGE, purge)

    def _grown(self) -> bool:
        """True when the table grew by ``fold_growth`` since this process's last fold (looked
        at once per commit: idle polls in between do not read the table's size again)."""
        if self._folded_bytes is None:
            return True
        if self.commits == self._commits_at_fold_check:
            return False
        self._commits_at_fold_check = self.commits
        grown_to = self._folded_bytes * (1 + self.policy.fold_growth)
        return self.store.file_stats().bytes >= grown_to

    def _start_fold(self) -> None:
        """The fold, in the maintenance thread: it reads one version of the table and commits
        beside the imports (subscriber.maintenance.rewrites). One that failed (a conflict
        with another writer's maintenance, an unreachable store) is tried again after
        FOLD_RETRY_S."""

        def failed() -> None:
            self._fold_not_before = self.clock() + min(FOLD_RETRY_S, self.policy.interval_s)

        self._background(FOLD, lambda: self._run(FOLD, self._fold), failed=failed)

    def _fold(self) -> StepOutcome:
        outcome = self.store.fold(self.policy.fold_max_scopes)
        state = self.store.state
        more = state is not None and state.scopes >= self.policy.fold_min_scopes
        # Scopes left beyond one run's bound: the next run follows, on the count alone.
        self._folded_bytes = None if more else self.store.file_stats().bytes
        return outcome

    def _compact(self, min_files: int) -> StepOutcome | Skipped:
        outcome = self.store.compact(self.policy.target_file_bytes, min_files)
        return SKIPPED if outcome is None else outcome

    def _checkpoint(self) -> None:
        self.store.checkpoint()

    def _set_retention(self) -> None:
        self.store.set_retention(self.policy.retention_s, self.policy.log_retention_s)

    def _start_vacuum(self, now: float) -> None:
        """VACUUM's turn: the retention step, at start and before each VACUUM (which deletes
        by the table's retention: someone may have changed it, ``scd content maintain
        --retention-hours``), then VACUUM when it is due. Both in the maintenance thread: on an
        idle poll only, the retention (and so VACUUM) never ran under a steady stream. A
        failing retention step skips that VACUUM: both come again after the interval."""
        vacuum = now - self._last[VACUUM] >= self.policy.interval_s
        self._retention_checked = True
        if vacuum:
            self._last[VACUUM] = now

        def turn() -> None:
            self._run(RETENTION, self._set_retention)
            if vacuum:
                self._run(VACUUM, self.store.vacuum)

        self._background(VACUUM, turn)

    def _background(
        self, step: str, work: Callable[[], object], *, failed: Callable[[], None] | None = None
    ) -> None:
        """Start ``step``'s turn in the maintenance thread: ``work``, which runs (``_run``)
        the step, or the steps of the turn. A failure is logged and counted (``failures``, the
        metrics) and the step tried again when next due: it never reaches the import thread."""

        def run() -> None:
            try:
                self.store.in_maintenance_thread()
                work()  # _run counts a failure of the step in the metrics
                return
            except Exception:
                log.warning(
                    "%s: store maintenance %s failed; trying again later",
                    self.name,
                    step,
                    exc_info=True,
                    extra={"agent": self.name, "step": step},
                )
            self.failures += 1
            if failed is not None:
                failed()

        self._turns[step] = self._starts
        self._starts += 1
        self._worker = threading.Thread(
            target=run, name=f"{MAINTENANCE_THREAD}{self.name}-{step}", daemon=True
        )
        self._worker.start()

    def _run(
        self, step: str, action: Callable[[], StepOutcome | Skipped | None]
    ) -> StepReport | None:
        """Run ``action``, and report it: logged, counted, in ``reports``; not one that found
        nothing to do (SKIPPED). None: a step that counts no files (a checkpoint)."""
        started = time.perf_counter()
        try:
            outcome = action()
        except Exception:
            if self.metrics is not None:
                self.metrics.maintenance_failed(step)
            raise
        if isinstance(outcome, Skipped):
            return None
        seconds = time.perf_counter() - started
        report = StepReport(step, round(seconds, 3))
        if outcome is not None:
            report = StepReport(step, round(seconds, 3), **asdict(outcome))
        self.reports.append(report)
        self.runs += 1
        if self.metrics is not None:
            if self.store.state is not None:
                self.metrics.store_scopes.set(self.store.state.scopes)
            self.metrics.maintenance_step(
                step, seconds, report.files_after, report.files_deleted, report.bytes_reclaimed
            )
        log.info(
            "%s: store maintenance %s in %.2f s: files %s -> %s, %d deleted, %d bytes reclaimed",
            self.name,
            step,
            seconds,
            report.files_before,
            report.files_after,
            report.files_deleted,
            report.bytes_reclaimed,
            extra={"agent": self.name, "step": step},
        )
        return report
