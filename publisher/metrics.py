"""Prometheus metrics of the publisher (Sling's publisher metrics under an ``scd_`` prefix).

Each agent owns its registry, so several agents (tests, embedded mode) never collide. Series
labelled by queue exist only for alive subscribers, whose number the discovery view caps
(``SCD_PUBLISHER_MAX_SUBSCRIBERS``): forged announcements cannot grow the scrape without bound.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# Package sizes from a few hundred bytes (DELETE) to the 64 MiB maximum.
SIZE_BUCKETS = (512, 4096, 16384, 65536, 262144, 819200, 4194304, 16777216, 67108864)
# Build/enqueue durations: a few ms for a small package, seconds for a large tree or a slow log.
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class PublisherMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.accepted_requests = Counter(
            "scd_accepted_requests", "Distribute requests put on the log", ["action"], registry=r
        )
        self.dropped_requests = Counter(
            "scd_dropped_requests", "Distribute requests refused or failed", ["reason"], registry=r
        )
        self.exported_package_size = Histogram(
            "scd_exported_package_size_bytes",
            "Serialized package size",
            buckets=SIZE_BUCKETS,
            registry=r,
        )
        self.spilled_packages = Counter(
            "scd_spilled_packages", "Packages sent by blob store reference", registry=r
        )
        self.build_package_duration = Histogram(
            "scd_build_package_duration_seconds",
            "Time to build a package",
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.enqueue_package_duration = Histogram(
            "scd_enqueue_package_duration_seconds",
            "Time to put a package on the log (spill included)",
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.queue_size = Gauge(
            "scd_queue_size", "Items in a subscriber queue", ["queue"], registry=r
        )
        self.queue_lag = Gauge(
            "scd_queue_lag_seconds",
            "Age of a queue's head item (0 when empty)",
            ["queue"],
            registry=r,
        )
        self.error_queue_size = Gauge(
            "scd_error_queue_size", "Items in a subscriber error queue", ["queue"], registry=r
        )
        self.fleet_lag_packages = Gauge(
            "scd_fleet_lag_packages", "Items in all alive subscriber queues", registry=r
        )
        self.fleet_max_lag_packages = Gauge(
            "scd_fleet_max_lag_packages", "Items in the largest subscriber queue", registry=r
        )
        self.fleet_max_lag_seconds = Gauge(
            "scd_fleet_max_lag_seconds", "Age of the oldest queue head item", registry=r
        )
        self.subscriber_count = Gauge("scd_subscriber_count", "Alive subscribers", registry=r)
        self.queue_cache_fetch_count = Counter(
            "scd_queue_cache_fetch_count", "Older ranges fetched into the queue cache", registry=r
        )
        self.queue_cache_entries = Gauge(
            "scd_queue_cache_entries", "Package entries held by the queue cache", registry=r
        )
        self.skipped_records = Counter(
            "scd_skipped_records",
            "Journal records skipped (unknown type, undecodable, handler error)",
            ["topic", "reason"],
            registry=r,
        )
        self.distributed_events = Counter(
            "scd_distributed_events", "PackageDistributedMessages sent", registry=r
        )
        self.events_fenced = Counter(
            "scd_distributed_events_fenced",
            "Times another instance took over sending events while this one still led",
            registry=r,
        )
        self.cleanup_deleted = Counter(
            "scd_cleanup_deleted_packages", "Package blobs deleted by the cleanup", registry=r
        )
        self.cleanup_stamped = Counter(
            "scd_cleanup_stamped_packages", "Package blobs stamped by the cleanup", registry=r
        )
        self.throttle_queue_size = Gauge(
            "scd_throttle_queue_size",
            "Largest queue of an alive editable subscriber, as throttling sees it",
            registry=r,
        )
        self.throttle_delay = Gauge(
            "scd_throttle_delay_seconds",
            "How long a distribute request is held back now (0: not throttled)",
            registry=r,
        )
        self.throttled_requests = Counter(
            "scd_throttled_requests", "Distribute requests held back by throttling", registry=r
        )
        self.leader = Gauge("scd_leader", "1 while this instance runs leader-only jobs", registry=r)
        self.bad_records = Counter(
            "scd_publisher_bad_records",
            "Decodable journal records skipped for out-of-range or invalid fields",
            ["topic"],
            registry=r,
        )
        self.discovery_dropped = Counter(
            "scd_discovery_dropped",
            "Subscribers dropped from the full discovery view (least recently announced first)",
            registry=r,
        )
        self.error_queues_dropped = Counter(
            "scd_error_queues_dropped",
            "Error queue state dropped at its bounds: whole subscribers, failed offsets, errors",
            ["kind"],
            registry=r,
        )
        self._series_lock = threading.Lock()
        self._series: dict[int, set[str]] = {}

    def set_per_queue(self, gauge: Gauge, values: Mapping[str, float]) -> None:
        """Set one series per queue and remove the series of queues no longer given: dropped
        and forgotten subscribers leave no series behind. (Removing, not clearing first: a
        scrape in between never sees every queue gone.)"""
        with self._series_lock:
            known = self._series.get(id(gauge), set())
            for gone in known - values.keys():
                gauge.remove(gone)
            for name, value in values.items():
                gauge.labels(name).set(value)
            self._series[id(gauge)] = set(values)

    def render(self) -> bytes:
        return generate_latest(self.registry)
