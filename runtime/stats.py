"""The one percentile of scd's benches and tests."""

from __future__ import annotations

import math
from collections.abc import Iterable


def percentile(values: Iterable[float], pct: float) -> float:
    """The nearest-rank ``pct`` percentile (``pct`` from 0 to 100) of ``values``: the smallest
    value that at least ``pct`` per cent of the values are at or below, no interpolation. Of
    sorted values v[1..n] that is v[ceil(pct / 100 * n)] (v[1] for 0): the p50 of ten values is
    the 5th, the p99 of 600 the 594th, p100 the largest. An empty ``values`` has none
    (ValueError)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no percentile of no values")
    if not 0 <= pct <= 100:
        raise ValueError(f"percentile {pct} is not between 0 and 100")
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]
