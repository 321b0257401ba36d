"""Subscriber metrics: names, labels, per-agent registries, text exposition."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from subscriber.metrics import SubscriberMetrics


def samples(metrics: SubscriberMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_every_sling_subscriber_metric_is_exposed_with_the_scd_prefix() -> None:
    m = SubscriberMetrics("sub1")
    m.status_sent("IMPORTED")
    m.ready("idle", 1.0)  # labelled by more than the agent: no series until first use
    names = {name for name, _ in samples(m)}
    for name in (
        "scd_imported_package_size_bytes",
        "scd_imported_package_duration_seconds",
        "scd_failed_package_imports_total",
        "scd_permanent_import_errors_total",
        "scd_transient_import_errors_total",
        "scd_current_retries",
        "scd_package_status_count",
        "scd_request_distributed_duration_seconds",
        "scd_readiness_duration_seconds",
        "scd_lag",
        "scd_batch_size",
        "scd_processed_offset",
    ):
        assert any(n == name or n.startswith(name + "_") for n in names), name


def test_recording_helpers() -> None:
    m = SubscriberMetrics("sub1")
    agent = (("agent", "sub1"),)
    m.package_imported(5000, created_ms=1_000, now_ms=3_500)
    m.package_imported(900_000, created_ms=0, now_ms=3_500)  # unknown creation time
    m.batch_imported(2, 0.3)
    m.import_failed(retriable=True)
    m.import_failed(retriable=False)
    m.import_failed(retriable=False)
    m.current_retries.set(2)
    m.status_sent("IMPORTED")
    m.status_sent("IMPORTED")
    m.status_sent("REMOVED_FAILED")
    m.offsets(processed=41, lag=8)
    m.ready("idle", 12.5)
    got = samples(m)
    assert got[("scd_imported_package_size_bytes_count", agent)] == 2
    # 5000 B is under 16 KiB, 900,000 B is over the 800 KiB inline limit
    assert got[("scd_imported_package_size_bytes_bucket", (*agent, ("le", "16384.0")))] == 1
    assert got[("scd_imported_package_size_bytes_bucket", (*agent, ("le", "819200.0")))] == 1
    assert got[("scd_request_distributed_duration_seconds_count", agent)] == 1
    assert got[("scd_request_distributed_duration_seconds_sum", agent)] == 2.5
    assert got[("scd_batch_size_sum", agent)] == 2
    assert got[("scd_imported_package_duration_seconds_sum", agent)] == 0.3
    assert got[("scd_failed_package_imports_total", agent)] == 3
    assert got[("scd_transient_import_errors_total", agent)] == 1
    assert got[("scd_permanent_import_errors_total", agent)] == 2
    assert got[("scd_current_retries", agent)] == 2
    assert got[("scd_package_status_count_total", (*agent, ("status", "IMPORTED")))] == 2
    assert got[("scd_package_status_count_total", (*agent, ("status", "REMOVED_FAILED")))] == 1
    assert got[("scd_processed_offset", agent)] == 41
    assert got[("scd_lag", agent)] == 8  # offsets 42..49 are left
    assert got[("scd_readiness_duration_seconds", (*agent, ("reason", "idle")))] == 12.5


def test_lag_is_kept_while_the_log_end_is_unknown() -> None:
    m = SubscriberMetrics("sub1")
    m.offsets(processed=9, lag=3)
    assert samples(m)[("scd_lag", (("agent", "sub1"),))] == 3
    m.offsets(processed=9, lag=None)
    assert samples(m)[("scd_lag", (("agent", "sub1"),))] == 3
    m.offsets(processed=12, lag=0)
    assert samples(m)[("scd_lag", (("agent", "sub1"),))] == 0


def test_two_agents_in_one_process_do_not_clash() -> None:
    a, b = SubscriberMetrics("a"), SubscriberMetrics("b")
    a.import_failed(retriable=True)
    assert samples(a)[("scd_failed_package_imports_total", (("agent", "a"),))] == 1
    assert samples(b)[("scd_failed_package_imports_total", (("agent", "b"),))] == 0
    assert b'agent="a"' not in b.render()
