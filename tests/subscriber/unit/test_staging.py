"""Staged (canary) import: the canaries' statuses weighed record by record (hostile ones
included), and on the embedded journal with in-memory stores the wait, the hold, a clear and a
resume (tests/subscriber/staging.py)."""

from __future__ import annotations

import threading
from functools import partial

import pytest
from pydantic import ValidationError

from journal.api import Record
from journal.wire import messages as m
from subscriber.bookkeeper.staging import MAX_AHEAD, MAX_FAILED, CanaryStatuses, Verdict
from subscriber.metrics import SubscriberMetrics
from subscriber.settings import SubscriberSettings
from subscriber.store.memory import MemoryLease, MemoryStore
from subscriber.writer.lease import WriterLease
from tests.subscriber import harness as h
from tests.subscriber import pause, staging
from tests.subscriber.harness import Env
from tests.subscriber.replays import Publisher
from tests.subscriber.unit.test_writer_role import Clock
from tests.waiting import wait_for

PUB = h.PUB
IMPORTED, REMOVED, FAILED = m.Status.IMPORTED, m.Status.REMOVED, m.Status.REMOVED_FAILED


class Statuses:
    """CanaryStatuses for canaries c1 and c2 over a log whose end the test moves."""

    def __init__(self, end: int = 100) -> None:
        self.end = end
        self.now = 0.0
        self.asked = 0
        self.metrics = SubscriberMetrics("staged")
        self.statuses = CanaryStatuses(
            ["c1", "c2"], [PUB], self._log_end, self.metrics, clock=lambda: self.now
        )

    def _log_end(self) -> int:
        self.asked += 1
        return self.end

    def report(
        self, canary: str, offset: int, status: int = IMPORTED, *, agent: str = PUB, pad: int = 0
    ) -> None:
        message = m.PackageStatusMessage(
            sub_sling_id="i" * (1 + pad), sub_agent_name=canary, pub_agent_name=agent,
            offset=offset, status=status,  # type: ignore[arg-type]
        )  # fmt: skip
        value, headers = m.encode(message)
        record = Record("status", 0, 0, 0, None, headers, value)
        self.statuses.on_status(m.decode(headers, value), record)  # type: ignore[arg-type]
        self.now += 1.0  # the log's end may be asked again

    def ignored(self, reason: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "scd_canary_statuses_ignored_total", {"agent": "staged", "reason": reason}
        )
        return value or 0.0

    def verdict(self, offset: int) -> Verdict:
        return self.statuses.verdict(PUB, offset)


def test_a_package_opens_once_every_canary_reported_it_or_a_later_offset() -> None:
    s = Statuses()
    assert s.verdict(10) == Verdict(pending=("c1", "c2"))
    s.report("c1", 10)
    assert s.verdict(10) == Verdict(pending=("c2",))
    s.report("c2", 12, REMOVED)  # a later offset (a clear on the canary counts as passed)
    assert s.verdict(10).open
    assert s.verdict(12) == Verdict(pending=("c1",))  # c1 went only as far as 10
    assert s.verdict(13) == Verdict(pending=("c1", "c2"))


def test_a_canary_failure_holds_that_package_only() -> None:
    s = Statuses()
    s.report("c1", 20, FAILED)
    s.report("c2", 25)
    assert s.verdict(20) == Verdict(failed=("c1",))
    assert s.verdict(21) == Verdict(pending=("c1",))  # c1 went only as far as 20
    s.report("c1", 22)
    assert s.verdict(21).open  # a later offset's status: c1 went past it


def test_hostile_statuses_release_nothing_and_are_counted() -> None:
    s = Statuses(end=100)
    s.report("c1", 50, pad=2000)  # oversized
    s.report("c1", 50, agent="someone-else")  # a publisher agent not followed
    s.report("c1", 50, status=7)  # no such status
    s.report("c1", -1)  # no such offset
    s.report("stranger", 50)  # not a canary: passed over
    s.report("c2", 50)
    assert s.verdict(50) == Verdict(pending=("c1",))
    assert [s.ignored(r) for r in ("oversized", "agent", "status", "offset")] == [1, 1, 1, 1]
    # Beyond the log's end: it would pass packages not written yet.
    s.report("c1", 10**15)
    assert s.verdict(50) == Verdict(pending=("c1",))


def test_a_status_read_before_the_log_end_was_known_counts_once_the_log_holds_it() -> None:
    s = Statuses(end=10)
    s.report("c1", 8)
    s.report("c2", 8)
    s.end = 30  # packages 10..29 written; a stale end until asked again
    s.now = 0.5
    s.statuses._asked = s.now  # the end was just asked: the next statuses are read "ahead"
    for offset in range(12, 12 + MAX_AHEAD + 10):
        s.statuses.on_status(*_status("c1", offset))
        s.statuses.on_status(*_status("c2", offset))
    s.now += 1.0
    assert s.verdict(29).open  # the ones the log holds now count
    assert s.verdict(30) == Verdict(pending=("c1", "c2"))


def _status(canary: str, offset: int) -> tuple[m.PackageStatusMessage, Record]:
    message = m.PackageStatusMessage(
        sub_sling_id="i", sub_agent_name=canary, pub_agent_name=PUB, offset=offset, status=IMPORTED
    )
    value, headers = m.encode(message)
    return message, Record("status", 0, 0, 0, None, headers, value)


def test_memory_stays_bounded_whatever_the_topic_holds() -> None:
    s = Statuses(end=10)
    asked = s.asked
    for offset in range(10**6, 10**6 + 3 * MAX_AHEAD):  # forged, far beyond the log
        s.statuses.on_status(*_status("c1", offset))
    for offset in range(100, 100 + MAX_FAILED + 50):
        message, record = _status("c2", offset)
        message.status = FAILED
        s.statuses.on_status(message, record)
    reports = s.statuses._reports[("c1", PUB)], s.statuses._reports[("c2", PUB)]
    assert len(reports[0].ahead) == MAX_AHEAD
    assert len(reports[1].failed) == MAX_FAILED
    assert reports[1].failed[0] == 100  # the lowest kept: the next ones to import
    assert s.asked - asked < 50  # the log's end asked at most every LOG_END_REFRESH_S


def test_staged_after_refuses_itself() -> None:
    with pytest.raises(ValidationError, match="wait for itself"):
        SubscriberSettings.model_validate({"agent_name": "x", "staged_after": "a, x"})
    settings = SubscriberSettings.model_validate({"agent_name": "x", "staged_after": "a, b"})
    assert settings.staged_after == ["a", "b"]


# ------------------------------------------------------------------ agents, embedded journal
def test_the_staged_import_waits_for_the_canary_and_a_failure_holds_until_cleared(
    local_env: Env,
) -> None:
    env = local_env
    staging.canary_gates_the_staged_import(
        env,
        partial(env.memory_agent, MemoryStore(), agent_name=staging.CANARY, editable=True,
                max_package_bytes=staging.CANARY_MAX_BYTES),
        partial(env.memory_agent, MemoryStore(), agent_name=staging.STAGED, editable=True,
                staged_after=[staging.CANARY], staged_wait_s=0.2),
    )  # fmt: skip


def test_a_resume_imports_a_held_package_and_wait_timeouts_never_give_up(local_env: Env) -> None:
    env = local_env
    broken = staging.send(env, "broken", size=staging.CANARY_MAX_BYTES)
    after = staging.send(env, "after")
    staged = env.memory_agent(
        MemoryStore(),
        agent_name=staging.STAGED,
        staged_after=[staging.CANARY],
        staged_wait_s=0.1,
        max_retries=0,  # a wait is no failed attempt: nothing is given up
    ).start()
    canary = None
    try:
        wait_for(
            lambda: staging.metric(staged, "scd_canary_wait_timeouts_total") >= 3,
            30,
            "waits timed out and went on",
        )
        assert staged.processed_offset == broken - 1
        assert staged.state == "WAITING_FOR_CANARY"
        canary = env.memory_agent(
            MemoryStore(),
            agent_name=staging.CANARY,
            editable=True,
            max_package_bytes=staging.CANARY_MAX_BYTES,
        ).start()
        wait_for(lambda: staged.state == "CANARY_FAILED", 60, "held")
        commands = pause.Commands(env, Publisher(env))
        commands.send(commands.message(staged, False), signed=False)  # resume: import anyway
        wait_for(lambda: staged.processed_offset == after, 60, "imported on the resume")
        assert {"/p/broken", "/p/after"} <= h.stored_paths(staged.store)
        assert staging.metric(staged, "scd_canary_waits_total") >= 1
    finally:
        staged.stop()
        if canary is not None:
            canary.stop()


def test_a_pause_during_the_wait_holds_the_import_after_the_canary_passed(local_env: Env) -> None:
    env = local_env
    first = staging.send(env, "a")
    staged = env.memory_agent(
        MemoryStore(), agent_name=staging.STAGED, staged_after=[staging.CANARY]
    ).start()
    canary = None
    try:
        wait_for(lambda: staged.state == "WAITING_FOR_CANARY", 30, "waiting")
        commands = pause.Commands(env, Publisher(env))
        commands.send(commands.message(staged, True), signed=False)
        wait_for(lambda: staged.state == "PAUSED", 30, "paused")
        canary = env.memory_agent(MemoryStore(), agent_name=staging.CANARY, editable=True).start()
        wait_for(lambda: canary.processed_offset == first, 30, "the canary imported it")
        stop = threading.Event()
        stop.wait(staging.HELD_S)
        assert staged.processed_offset == first - 1  # paused: not imported
        commands.send(commands.message(staged, False), signed=False)
        wait_for(lambda: staged.processed_offset == first, 30, "imported after the resume")
    finally:
        staged.stop()
        if canary is not None:
            canary.stop()


def test_a_writer_whose_lease_lapses_while_waiting_stands_by_without_importing(
    local_env: Env,
) -> None:
    env = local_env
    staging.send(env, "a")
    shared, clock, store = MemoryLease(), Clock(), MemoryStore()
    staged = env.memory_agent(
        store,
        WriterLease(shared, "a", 12.0, 2.0, clock),
        agent_name=staging.STAGED,
        staged_after=[staging.CANARY],
    ).start()
    try:
        wait_for(lambda: staged.state == "WAITING_FOR_CANARY", 30, "waiting")
        shared.fail = True  # the lease cannot be renewed: it lapses
        clock.now += 12.0
        staged.role.tick()
        wait_for(lambda: staged.state == "STANDBY", 30, "stood by")
        wait_for(lambda: staged.health().canary_wait is None, 30, "the wait given up")
        assert store.committed_offsets() == []
    finally:
        staged.stop()
