"""Replays refused on Kafka with the Delta store (tests/subscriber/replays.py). That the numbers
are committed with the content and read back by a restarted process, the Delta store contract
shows (tests/contract/store_contract.py); the restart scenario runs on the fast suite."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from tests.subscriber import replays
from tests.subscriber.harness import Env

pytestmark = pytest.mark.integration


def test_a_copied_add_and_a_copied_delete_change_nothing(env: Env, spark: Any) -> None:
    replays.copied_add_and_delete(env, partial(env.agent, spark), restart=False)


def test_a_reordered_pair_reports_a_gap_and_refuses_the_lower(env: Env, spark: Any) -> None:
    replays.reordered_pair(env, partial(env.agent, spark))


def test_a_copied_clear_command_clears_nothing(env: Env, spark: Any) -> None:
    replays.copied_clear_command(env, partial(env.agent, spark))


def test_a_clear_by_sequence_covers_packages_by_number_not_offset(env: Env, spark: Any) -> None:
    replays.clear_by_sequence(env, partial(env.agent, spark))
