"""Replays refused on the embedded journal with the in-memory store (tests/subscriber/replays.py),
and the sequence check's rules on their own."""

from __future__ import annotations

from functools import partial

from subscriber.bookkeeper.sequences import SequenceCheck
from subscriber.metrics import SubscriberMetrics
from subscriber.store.base import StoreState
from subscriber.store.memory import MemoryStore
from tests.subscriber import replays
from tests.subscriber.harness import Env


def test_a_copied_add_and_a_copied_delete_change_nothing(local_env: Env) -> None:
    replays.copied_add_and_delete(local_env, partial(local_env.memory_agent, MemoryStore()))


def test_a_reordered_pair_reports_a_gap_and_refuses_the_lower(local_env: Env) -> None:
    replays.reordered_pair(local_env, partial(local_env.memory_agent, MemoryStore()))


def test_a_copied_clear_command_clears_nothing(local_env: Env) -> None:
    replays.copied_clear_command(local_env, partial(local_env.memory_agent, MemoryStore()))


def check(stored: dict[str, int]) -> SequenceCheck:
    store = MemoryStore()
    store.state = StoreState(instance_id="i", offset=None, sequences=stored)
    return SequenceCheck("sub", store, SubscriberMetrics("sub"))


def test_the_rules() -> None:
    c = check({"pub": 5})
    assert not c.admit("pub", 5, 10, {})  # the last applied
    assert not c.admit("pub", 6, 11, {"pub": 7})  # below one of the batch in progress
    assert c.admit("pub", 0, 12, {})  # not numbered: today's behaviour
    assert c.admit("other", 1, 13, {})  # first number of another agent: no gap
    assert c.gap is None
    assert c.replays == 2
    assert c.admit("pub", 6, 14, {})
    assert c.admit("pub", 9, 15, {"pub": 6})  # 7..8 missing: imported, reported
    assert c.gap is not None
    assert (c.gap.first, c.gap.last, c.gap.offset) == (7, 8, 15)
    assert c.reason() is not None
    assert "7..8" in str(c.reason())


def test_a_clear_by_sequence_covers_packages_by_number_not_offset(local_env: Env) -> None:
    replays.clear_by_sequence(local_env, partial(local_env.memory_agent, MemoryStore()))
