"""Prometheus metrics of the import hooks (Sling's pre/post-processor and invalidation
metrics), in the agent's registry (subscriber.metrics) with its ``agent`` label, by ``hook``
(its configured name: bounded by the configuration, not by the packages) and ``phase``
(``pre`` before the import, ``post`` after the commit)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from subscriber.metrics import SubscriberMetrics

# A hook runs in the import thread, once per package: a few ms is fine, 100 ms halves the
# throughput of small packages when behind, seconds mean a remote call that stalls imports.
HOOK_DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 30.0)


class HookMetrics:
    def __init__(self, metrics: SubscriberMetrics) -> None:
        self.agent = metrics.agent
        r, labels = metrics.registry, ["agent", "hook", "phase"]
        self._requests = Counter(
            "scd_import_hook_requests", "Calls of an import hook", labels, registry=r
        )
        self._successes = Counter(
            "scd_import_hook_successes", "Calls of an import hook that returned", labels, registry=r
        )
        self._failures = Counter(
            "scd_import_hook_failures",
            "Calls of an import hook that raised, by error class (permanent: the package is "
            "REMOVED_FAILED; transient: a retry may mend it)",
            [*labels, "error_class"],
            registry=r,
        )
        self._duration = Histogram(
            "scd_import_hook_duration_seconds",
            "Duration of one call of an import hook",
            labels,
            buckets=HOOK_DURATION_BUCKETS,
            registry=r,
        )

    def called(self, hook: str, phase: str, seconds: float, error_class: str | None) -> None:
        """One call of ``hook`` in ``phase``; ``error_class`` None: it returned."""
        self._requests.labels(self.agent, hook, phase).inc()
        self._duration.labels(self.agent, hook, phase).observe(seconds)
        if error_class is None:
            self._successes.labels(self.agent, hook, phase).inc()
        else:
            self._failures.labels(self.agent, hook, phase, error_class).inc()
