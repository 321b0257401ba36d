"""Store maintenance scheduling (subscriber.maintenance.scheduler) on the in-memory store: one
step per idle poll; the purge in the import thread, the fold, checkpoint, compaction and
VACUUM's turn (the retention, then VACUUM) in the maintenance thread while imports go on, one at
a time; a failed step is logged, counted and tried again later; maintenance off runs only the
purge, the fold and the checkpoint."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest

from journal.wire import messages as m
from subscriber.maintenance.scheduler import FOLD_RETRY_S, Maintenance, MaintenancePolicy
from subscriber.metrics import SubscriberMetrics
from subscriber.store.base import StepOutcome
from subscriber.store.memory import MemoryStore
from tests.subscriber.harness import Env
from tests.subscriber.packages import add, node, package

ADD = m.ReqType.ADD


def calls(store: MemoryStore) -> list[str]:
    return [name for name, _ in store.maintenance_calls]


class Clock:
    """Monotonic time that a test can move forward."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset


def committed_store(commits: int) -> MemoryStore:
    store = MemoryStore()
    store.open()
    for i in range(commits):
        changes = store.begin()
        changes.add(add(i, f"/p{i}", node(f"/p{i}", v="x")))
        store.commit(changes)
    return store


def run_step(maintenance: Maintenance, store: MemoryStore) -> str | None:
    """One idle poll's step, waited for when it went to the maintenance thread: its name."""
    before = len(store.maintenance_calls)
    maintenance.step()
    maintenance.wait(5)
    ran = calls(store)[before:]
    assert len(ran) <= 1  # one store operation per call
    return ran[0] if ran else None


def test_each_call_runs_the_first_due_step_only() -> None:
    store = committed_store(5)
    clock = Clock()
    policy = MaintenancePolicy(
        purge_every_commits=5, checkpoint_every_commits=3, compact_min_files=2, interval_s=60
    )
    maintenance = Maintenance("sub", store, policy, clock=clock)
    maintenance.commits_since_purge = 5  # as the import loop counts them
    ran = [run_step(maintenance, store) for _ in range(6)]
    assert ran == ["purge", "checkpoint", "retention", "compact", None, None]
    assert store.maintenance_calls[2] == ("retention", (policy.retention_s, policy.log_retention_s))
    report = maintenance.reports[-1]
    assert (report.files_before, report.files_after) == (5, 1)

    # The interval passed: VACUUM's turn in its thread, the retention again (VACUUM deletes
    # by it) and VACUUM; then nothing (five scopes wait: too few to fold).
    for _ in range(2):
        clock.offset += 61
        assert maintenance.step() is None
        maintenance.wait(5)
        assert calls(store)[-2:] == ["retention", "vacuum"]
        before = len(store.maintenance_calls)
        assert maintenance.step() is None
        maintenance.wait(5)
        assert len(store.maintenance_calls) == before


def test_a_compaction_that_finds_too_few_small_files_is_not_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The compaction counts the small files itself (where it is planned: the store's process
    lists no files to see whether one is due); finding fewer than ``compact_min_files`` it
    rewrites nothing, and no report, log line or metric says it ran."""
    caplog.set_level("INFO", logger="subscriber.maintenance.scheduler")
    store = committed_store(5)
    metrics = SubscriberMetrics("sub")
    policy = MaintenancePolicy(purge_every_commits=5, compact_min_files=6, interval_s=60)
    maintenance = Maintenance("sub", store, policy, metrics=metrics, clock=Clock())
    maintenance.commits_since_purge = 5
    ran = [run_step(maintenance, store) for _ in range(3)]
    assert ran == ["purge", "retention", "compact"]
    assert store.files == 5  # nothing rewritten
    assert [r.step for r in maintenance.reports] == ["purge", "retention"]
    assert 'step="compact"' not in metrics.render().decode()
    assert "store maintenance retention" in caplog.text
    assert "store maintenance compact" not in caplog.text


def test_maintenance_off_only_purges_folds_and_checkpoints() -> None:
    store = committed_store(4)
    clock = Clock()
    policy = MaintenancePolicy(
        enabled=False, purge_every_commits=4, checkpoint_every_commits=4, fold_min_scopes=4
    )
    maintenance = Maintenance("sub", store, policy, clock=clock)
    maintenance.commits_since_purge = 4
    clock.offset += 10 * policy.interval_s
    for _ in range(5):
        maintenance.step()
    maintenance.wait(5)
    assert calls(store) == ["purge", "checkpoint", "fold"]  # a due checkpoint goes first


def test_a_fold_runs_once_enough_scopes_wait_and_a_failed_one_waits_to_retry() -> None:
    store = committed_store(3)
    clock = Clock()
    policy = MaintenancePolicy(fold_min_scopes=4, fold_max_scopes=10, interval_s=3600)
    metrics = SubscriberMetrics("sub")
    metrics.store_scopes.set(3)
    maintenance = Maintenance("sub", store, policy, metrics=metrics, clock=clock)
    maintenance._retention_checked = True  # only the fold is of interest here
    assert maintenance.step() is None  # 3 scopes: not yet
    changes = store.begin()
    changes.add(add(3, "/p3", node("/p3", v="x")))
    store.commit(changes)
    assert store.state is not None
    assert store.state.scopes == 4
    failing = FailingFold()
    failing.shared, failing.scopes = store.shared, store.scopes
    failing.open()
    failing_maintenance = Maintenance("sub", failing, policy, metrics=metrics, clock=clock)
    failing_maintenance._retention_checked = True
    assert failing_maintenance.step() is None  # started in the maintenance thread
    assert failing.fold_started.wait(5)
    failing_maintenance.wait(5)
    assert failing_maintenance.failures == 1
    assert not failing_maintenance.busy
    failing.fold_started.clear()
    failing_maintenance.step()
    assert not failing.fold_started.is_set()  # not again right away
    clock.offset += FOLD_RETRY_S
    failing_maintenance.step()
    failing_maintenance.wait(5)
    assert failing.fold_started.is_set()
    assert failing_maintenance.failures == 2
    failures = 'scd_store_maintenance_failures_total{agent="sub",step="fold"} 2.0'
    assert failures in metrics.render().decode()
    assert run_step(maintenance, store) == "fold"
    assert maintenance.reports[-1].step == "fold"
    assert store.state.scopes == 0
    assert store.maintenance_calls[-1] == ("fold", 10)
    assert 'scd_store_scopes{agent="sub"} 0.0' in metrics.render().decode()


def commit_pages(store: MemoryStore, first: int, count: int) -> None:
    for i in range(first, first + count):
        changes = store.begin()
        changes.add(add(i, f"/p{i}", node(f"/p{i}", v="x")))
        store.commit(changes)


def test_after_a_fold_the_next_waits_until_the_table_grew_by_the_fold_growth() -> None:
    store = committed_store(4)  # 4 versions and 4 scopes: 8 "bytes"
    policy = MaintenancePolicy(fold_min_scopes=1, fold_growth=1.0, enabled=False)
    maintenance = Maintenance("sub", store, policy)

    def step_after_commit(page: int) -> str | None:
        commit_pages(store, page, 1)  # one version and one scope: 2 bytes
        maintenance.commits_since_purge += 1  # as the import loop counts them
        return run_step(maintenance, store)

    # The process's first fold: on the scope count alone.
    assert run_step(maintenance, store) == "fold"
    assert store.table_bytes == 4  # the current tree is left: doubled at 8
    assert [step_after_commit(p) for p in (4, 5)] == [None, "fold"]  # 6, then 8
    assert store.table_bytes == 6  # doubled at 12
    assert [step_after_commit(p) for p in (6, 7, 8)] == [None, None, "fold"]
    assert calls(store) == ["fold"] * 3


def test_a_fold_that_leaves_scopes_beyond_its_bound_is_followed_at_once() -> None:
    store = committed_store(10)
    policy = MaintenancePolicy(
        fold_min_scopes=3, fold_max_scopes=4, enabled=False, checkpoint_every_commits=100
    )
    maintenance = Maintenance("sub", store, policy)
    folds = [run_step(maintenance, store) for _ in range(4)]
    assert folds == ["fold", "fold", None, None]
    assert store.state is not None
    assert store.state.scopes == 2  # fewer than fold_min_scopes: left for later
    assert calls(store) == ["fold", "fold"]


@dataclass
class FailingFold(MemoryStore):
    fold_started: threading.Event = field(default_factory=threading.Event)

    def fold(self, max_scopes: int) -> StepOutcome:
        self.fold_started.set()
        raise OSError(f"store unreachable (folding {max_scopes} scopes)")


@dataclass
class BlockingSteps(MemoryStore):
    """A store whose fold, checkpoint, compaction and VACUUM each block until released."""

    release: threading.Event = field(default_factory=threading.Event)
    started: list[str] = field(default_factory=list)

    def _block(self, step: str) -> None:
        self.started.append(step)
        assert self.release.wait(30)
        self.release.clear()

    def fold(self, max_scopes: int) -> StepOutcome:
        self._block("fold")
        return super().fold(max_scopes)

    def checkpoint(self) -> None:
        self._block("checkpoint")
        super().checkpoint()

    def compact(self, target_file_bytes: int, min_files: int = 2) -> StepOutcome | None:
        self._block("compact")
        return super().compact(target_file_bytes, min_files)

    def vacuum(self) -> StepOutcome:
        self._block("vacuum")
        return super().vacuum()


def wait_started(store: BlockingSteps, count: int) -> None:
    deadline = time.monotonic() + 5
    while len(store.started) < count:
        assert time.monotonic() < deadline
        time.sleep(0.001)


def test_imports_go_on_while_a_step_runs_in_the_maintenance_thread(local_env: Env) -> None:
    """Compaction and VACUUM block in the maintenance thread: every package sent meanwhile is
    imported by the next poll, and no other step starts (a purge falls due) until it ends."""
    env = local_env
    store = BlockingSteps()
    agent = env.memory_agent(
        store, batch_max=1, purge_every_commits=3, maintenance_compact_min_files=2
    )
    for i in range(3):
        env.send(package(f"p{i}", ADD, [(f"/p{i}", True)], [node(f"/p{i}")]))
    maintenance = agent.maintenance
    while agent.run_once():
        maintenance.wait(5)  # after a commit: the retention at start, in its thread
    assert calls(store) == ["retention", "purge"]  # the last call found nothing: the purge
    assert agent.run_once() == 0  # starts the compaction, which blocks
    wait_started(store, 1)
    assert maintenance.busy
    for i in range(3, 7):  # a purge falls due on the way: it waits for the compaction
        offset = env.send(package(f"p{i}", ADD, [(f"/p{i}", True)], [node(f"/p{i}")]))
        assert agent.run_once() == 1
        assert agent.processed_offset == offset
        assert agent.run_once() == 0
    assert store.started == ["compact"]
    assert calls(store)[-1] == "purge"
    store.release.set()
    maintenance.wait(5)
    assert calls(store)[-1] == "compact"
    assert agent.run_once() == 0
    assert calls(store)[-1] == "purge"  # the step that waited

    # VACUUM too: imports go on, nothing else starts until it ends.
    maintenance.clock = Clock()
    assert isinstance(maintenance.clock, Clock)
    maintenance.clock.offset += maintenance.policy.interval_s + 1
    while not maintenance.busy:
        assert agent.run_once() == 0
    wait_started(store, 2)
    assert store.started[-1] == "vacuum"
    during = env.send(package("during", ADD, [("/during", True)], [node("/during")]))
    before = len(store.maintenance_calls)
    assert agent.run_once() == 1
    assert agent.processed_offset == during
    assert agent.run_once() == 0
    assert len(store.maintenance_calls) == before  # busy: no step started
    store.release.set()
    maintenance.wait(5)
    assert not maintenance.busy
    assert maintenance.reports[-1].step == "vacuum"
    metrics = agent.metrics.render().decode()
    assert 'scd_store_maintenance_runs_total{agent="sub",step="vacuum"} 1.0' in metrics
    assert 'scd_store_maintenance_seconds_count{agent="sub",step="compact"}' in metrics
    assert 'scd_store_files{agent="sub"}' in metrics
    agent.stop()


def test_commits_go_on_during_a_fold_and_a_checkpoint_and_nothing_else_starts() -> None:
    """The fold and the checkpoint run in the maintenance thread: the store takes commits
    meanwhile, and every call in between starts nothing (a fold and a purge are due). The
    checkpoint, due first, runs first; then the fold, although later commits made a checkpoint
    due again: the two take turns."""
    store = BlockingSteps()
    store.open()
    commit_pages(store, 0, 4)
    policy = MaintenancePolicy(
        enabled=False, fold_min_scopes=4, purge_every_commits=2, checkpoint_every_commits=2
    )
    maintenance = Maintenance("sub", store, policy)
    assert maintenance.step() is None
    wait_started(store, 1)
    assert store.started == ["checkpoint"]
    for page in range(4, 8):
        commit_pages(store, page, 1)
        maintenance.commits_since_purge += 1
        assert maintenance.step() is None
    assert store.started == ["checkpoint"]
    assert calls(store) == []
    store.release.set()
    maintenance.wait(5)
    assert calls(store) == ["checkpoint"]
    commit_pages(store, 8, 2)
    assert store.commits_since_checkpoint >= policy.checkpoint_every_commits
    assert run_step(maintenance, store) == "purge"
    assert maintenance.step() is None
    wait_started(store, 2)
    assert store.started == ["checkpoint", "fold"]
    commit_pages(store, 10, 1)
    assert maintenance.step() is None
    store.release.set()
    maintenance.wait(5)
    assert calls(store) == ["checkpoint", "purge", "fold"]
    assert [r.step for r in maintenance.reports] == ["checkpoint", "purge", "fold"]


@dataclass
class FailingCompaction(MemoryStore):
    def compact(self, target_file_bytes: int, min_files: int = 2) -> StepOutcome | None:
        raise RuntimeError(
            f"compaction of {min_files} files to {target_file_bytes} bytes went wrong"
        )


def test_a_failing_step_is_logged_counted_and_does_not_stop_imports(
    local_env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    env = local_env
    store = FailingCompaction()
    agent = env.memory_agent(
        store, batch_max=1, purge_every_commits=2, maintenance_compact_min_files=2
    )
    for i in range(2):
        env.send(package(f"p{i}", ADD, [(f"/p{i}", True)], [node(f"/p{i}")]))
    for _ in range(6):
        agent.run_once()  # imports, purge, retention, the failing compaction, ...
    agent.maintenance.wait(5)
    assert "store maintenance compact failed; trying again later" in caplog.text
    assert agent.maintenance.failures == 1
    metrics = agent.metrics.render().decode()
    assert 'scd_store_maintenance_failures_total{agent="sub",step="compact"} 1.0' in metrics
    offset = env.send(package("after", ADD, [("/after", True)], [node("/after")]))
    assert agent.run_once() == 1
    assert agent.processed_offset == offset
    agent.stop()


@dataclass
class FailingRetention(MemoryStore):
    fail: bool = True

    def set_retention(self, retention_s: float, log_retention_s: float) -> bool:
        if self.fail:
            raise RuntimeError("table properties cannot be read")
        return super().set_retention(retention_s, log_retention_s)


def test_no_vacuum_by_a_retention_not_checked() -> None:
    """VACUUM deletes by the table's retention: it runs only right after the retention step
    confirmed (or set) the subscriber's, and a failing retention step postpones it."""
    store = FailingRetention()
    store.open()
    clock = Clock()
    maintenance = Maintenance("sub", store, MaintenancePolicy(interval_s=60), clock=clock)
    assert maintenance.step() is None  # VACUUM's turn at start: the retention alone
    maintenance.wait(5)
    assert maintenance.failures == 1
    clock.offset += 61
    assert maintenance.step() is None  # the retention again, before the VACUUM that is due
    maintenance.wait(5)
    assert maintenance.failures == 2
    assert maintenance.step() is None  # no VACUUM: postponed by an interval
    assert not maintenance.busy
    assert calls(store) == []
    store.fail = False
    clock.offset += 61
    assert maintenance.step() is None
    maintenance.wait(5)
    assert calls(store) == ["retention", "vacuum"]


def test_after_a_commit_only_steps_of_the_maintenance_thread_start() -> None:
    """Under a steady stream no poll comes back empty: after each commit the import loop
    starts the step of the maintenance thread that is due (the fold, the checkpoint, the
    compaction, VACUUM's turn: the retention, then VACUUM), never the purge (which runs in
    the import thread)."""
    store = committed_store(6)
    clock = Clock()
    policy = MaintenancePolicy(
        purge_every_commits=2, checkpoint_every_commits=3, fold_min_scopes=4, interval_s=60
    )
    maintenance = Maintenance("sub", store, policy, clock=clock)
    maintenance.commits_since_purge = 6
    clock.offset += 61  # VACUUM and the timed compaction are due too
    for _ in range(5):
        maintenance.step(inline=False)
        maintenance.wait(5)
    # Then nothing: no purge.
    assert calls(store) == ["checkpoint", "fold", "retention", "vacuum", "compact"]
    assert maintenance.step() is not None  # an idle poll: the purge
    assert calls(store)[-1] == "purge"


def test_compaction_and_vacuum_take_turns_with_a_checkpoint_due_after_every_step() -> None:
    """On a large store under a steady stream a checkpoint is due again whenever one ends: the
    compaction and VACUUM that are due still get their turns (the step started least recently
    goes first), the retention checked right before VACUUM, in its turn."""
    store = committed_store(4)
    clock = Clock()
    policy = MaintenancePolicy(checkpoint_every_commits=1, compact_min_files=2, interval_s=60)
    maintenance = Maintenance("sub", store, policy, clock=clock)
    clock.offset += 61  # compaction (timed) and VACUUM are due
    maintenance.commits_since_purge = 4
    maintenance.commits_since_purge = 0  # purged: only the thread's steps are due
    for page in range(10, 16):
        commit_pages(store, page, 1)  # a checkpoint is due again
        maintenance.step()
        maintenance.wait(5)
    turns = ["checkpoint", "retention", "vacuum", "compact", "checkpoint", "checkpoint"]
    assert calls(store) == [*turns, "checkpoint"]
