"""Readiness rules (Sling's defaults) with an injected clock."""

from __future__ import annotations

import pytest

from subscriber.readiness import Readiness, ReadinessRules, ReadyReason

T0 = 1_700_000_000.0  # a fixed wall-clock start


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def fresh(rules: ReadinessRules | None = None) -> tuple[Readiness, Clock]:
    clock = Clock()
    return Readiness(rules, clock=clock), clock


def test_idle_for_the_idle_time_makes_ready() -> None:
    r, clock = fresh()
    r.on_poll(0)
    clock.now += 9.9
    ready, reason = r.check()
    assert not ready
    assert "idle for 9.9 s" in reason
    clock.now += 0.1
    ready, reason = r.check()
    assert ready
    assert r.reason is ReadyReason.IDLE
    assert "idle" in reason
    assert r.ready_after_s == pytest.approx(10.0)


def test_records_restart_the_idle_time() -> None:
    r, clock = fresh()
    r.on_poll(0)
    clock.now += 8
    r.on_poll(3)  # work arrived: not idle any more
    clock.now += 5
    ready, reason = r.check()
    assert not ready
    assert "importing" in reason
    r.on_poll(0)
    r.on_poll(0)  # further empty polls do not move the start of the idle period
    clock.now += 10
    assert r.check()[0]


def test_no_poll_yet_is_not_idle() -> None:
    r, clock = fresh()
    clock.now += 60
    assert not r.check()[0]


def test_retrying_is_not_idle() -> None:
    r, clock = fresh()
    r.on_poll(0)
    clock.now += 5
    r.on_retries(1)
    clock.now += 6
    assert not r.check()[0]


def test_paused_is_not_idle() -> None:
    r, clock = fresh()
    r.on_poll(0)
    clock.now += 5
    r.on_paused()
    clock.now += 60
    ready, reason = r.check()
    assert not ready
    assert "paused" in reason
    r.on_poll(0)  # resumed: the idle time starts again
    clock.now += 9
    assert not r.check()[0]
    clock.now += 1
    assert r.check()[0]


def test_recent_message_makes_ready_at_once() -> None:
    r, clock = fresh()
    r.on_imported(int((clock.now - 121) * 1000))
    assert not r.check()[0]
    r.on_imported(int((clock.now - 119) * 1000))
    ready, reason = r.check()
    assert ready
    assert r.reason is ReadyReason.RECENT
    assert "119.0 s old" in reason


def test_unknown_creation_time_is_ignored() -> None:
    r, _ = fresh()
    r.on_imported(0)
    assert not r.check()[0]


def test_more_than_max_retries_makes_ready() -> None:
    r, _ = fresh()
    r.on_retries(10)
    assert not r.check()[0]
    r.on_retries(11)
    assert r.check()[0]
    assert r.reason is ReadyReason.RETRIES


def test_forced_after_the_force_time() -> None:
    r, clock = fresh()
    r.on_poll(5)
    clock.now += 299
    ready, reason = r.check()
    assert not ready
    assert "forced ready in 1 s" in reason
    clock.now += 1
    assert r.check()[0]
    assert r.reason is ReadyReason.FORCED


def test_once_ready_stays_ready() -> None:
    r, clock = fresh()
    r.on_retries(11)
    first = r.check()
    r.on_poll(100)
    r.on_retries(0)
    clock.now += 1000
    assert r.check() == first
    assert r.reason is ReadyReason.RETRIES  # a later rule does not replace the first
    assert r.ready_after_s == 0


def test_rules_are_configurable_and_can_be_turned_off() -> None:
    rules = ReadinessRules(idle_s=0.5, max_message_age_s=None, max_retries=None, force_ready_s=None)
    r, clock = fresh(rules)
    r.on_imported(int(clock.now * 1000))
    r.on_retries(1000)
    clock.now += 10_000
    assert not r.check()[0]
    r.on_poll(0)
    clock.now += 0.5
    assert r.check()[0]
    assert r.reason is ReadyReason.IDLE


def test_negative_thresholds_are_refused() -> None:
    with pytest.raises(ValueError, match="idle_s"):
        ReadinessRules(idle_s=-1)


def test_explicit_now_overrides_the_clock() -> None:
    r = Readiness(clock=lambda: 0.0, started=100.0)
    r.on_poll(0, now=100.0)
    assert not r.check(now=105.0)[0]
    assert r.check(now=110.0)[0]


def test_caught_up_to_the_log_s_end_at_start_makes_ready_at_once() -> None:
    r, clock = fresh()
    r.on_position(40)  # before the goal is known: nothing to compare with
    assert not r.check()[0]
    r.expect_end(100)
    r.expect_end(250)  # a reopen does not move the goal
    clock.now += 3.0
    r.on_position(99)
    ready, reason = r.check()
    assert not ready
    assert "ready at offset 100" in reason
    r.on_position(100)
    ready, reason = r.check()
    assert ready
    assert r.reason is ReadyReason.CAUGHT_UP
    assert "caught up to offset 100" in reason
    assert r.ready_after_s == pytest.approx(3.0)


def test_caught_up_is_not_reached_while_paused_and_can_be_turned_off() -> None:
    r, _ = fresh()
    r.expect_end(10)
    r.on_paused()
    r.on_position(10)
    assert not r.check()[0]
    r.on_poll(0)  # resumed
    r.on_position(10)
    assert r.reason is ReadyReason.CAUGHT_UP
    off, _ = fresh(ReadinessRules(caught_up=False))
    off.expect_end(10)
    off.on_position(10)
    assert not off.check()[0]
