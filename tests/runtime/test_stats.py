"""runtime.stats.percentile: nearest rank, no interpolation."""

from __future__ import annotations

import pytest

from runtime.stats import percentile


def test_nearest_rank_of_ten_and_of_six_hundred() -> None:
    ten = [float(v) for v in range(10, 0, -1)]  # unsorted on purpose
    assert percentile(ten, 50) == 5.0
    assert percentile(ten, 90) == 9.0
    assert percentile(ten, 99) == 10.0
    assert percentile(ten, 0) == 1.0
    assert percentile(ten, 100) == 10.0
    assert percentile([float(v) for v in range(1, 601)], 99) == 594.0


def test_one_value_is_every_percentile() -> None:
    assert percentile([3.5], 0) == percentile([3.5], 50) == percentile([3.5], 100) == 3.5


def test_no_values_and_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)
    with pytest.raises(ValueError, match="between 0 and 100"):
        percentile([1.0], 101)
