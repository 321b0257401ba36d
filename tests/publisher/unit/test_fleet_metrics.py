"""Fleet totals an autoscaler scales on, built by update_metrics from the queue summaries."""

from __future__ import annotations

from types import SimpleNamespace

from publisher.agent import PublisherAgent
from publisher.metrics import PublisherMetrics
from publisher.queues.throttle import Throttle


def totals(sizes_lags: list[tuple[int, int]]) -> tuple[float, float, float]:
    summaries = [
        SimpleNamespace(
            name=f"q{i}",
            size=size,
            lag_ms=lag,
            error_queue_name=f"q{i}-error",
            error_queue_size=0,
            subscriber=SimpleNamespace(editable=False),
        )
        for i, (size, lag) in enumerate(sizes_lags)
    ]
    m = PublisherMetrics()
    agent = SimpleNamespace(
        queues=SimpleNamespace(summaries=lambda: summaries),
        metrics=m,
        throttle=Throttle(0, 0),
        _pollers=[],
        _skips_reported={},
    )
    PublisherAgent.update_metrics(agent)  # type: ignore[arg-type]
    return (
        m.fleet_lag_packages._value.get(),
        m.fleet_max_lag_packages._value.get(),
        m.fleet_max_lag_seconds._value.get(),
    )


def test_fleet_totals_are_zero_without_subscribers() -> None:
    assert totals([]) == (0, 0, 0)


def test_fleet_totals_sum_and_max_over_several_subscribers() -> None:
    assert totals([(3, 500), (10, 2000), (0, 0)]) == (13, 10, 2.0)
