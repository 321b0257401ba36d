"""What "still alive after the garbage" means, checked from outside the agents: their threads
still run, no loop had to be restarted, and their HTTP endpoints answer.

Nothing here knows an agent's internals but which threads come and go by design: threads are
the ones that appeared while the agents started (not those), and restarts are read from the
Prometheus text of /metrics (every counter whose name says "restart":
scd_thread_restarts_total, scd_import_loop_restarts_total, ...).
"""

from __future__ import annotations

import json
import threading

from prometheus_client.parser import text_string_to_metric_families

from publisher.client import PublisherClient
from subscriber.maintenance.scheduler import MAINTENANCE_THREAD

# Threads that come and go by design: request workers of the ASGI servers, executor workers
# started on demand, the helpers of a stopping publisher, and the store maintenance steps' (a
# thread per step: one that ran as the agents started ended with its step).
TRANSIENT_THREADS = (
    "AnyIO worker thread",
    "asyncio_",
    "ThreadPoolExecutor-",
    "publisher-stop",
    MAINTENANCE_THREAD,
)


class ThreadWatch:
    """The threads that agents started between ``__init__`` and ``started``."""

    def __init__(self) -> None:
        self._before = set(threading.enumerate())
        self.watched: list[threading.Thread] = []

    def started(self) -> list[str]:
        self.watched = [
            t
            for t in threading.enumerate()
            if t not in self._before and not t.name.startswith(TRANSIENT_THREADS)
        ]
        return sorted(t.name for t in self.watched)

    def dead(self) -> list[str]:
        return sorted(t.name for t in self.watched if not t.is_alive())


def restart_counts(metrics_text: str) -> dict[str, float]:
    """Every sample of a restart counter in a Prometheus exposition, by name and labels."""
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics_text):
        if "restart" not in family.name:
            continue
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            counts[f"{sample.name}{json.dumps(sample.labels, sort_keys=True)}"] = sample.value
    return counts


def increased(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """The counters that went up between two ``restart_counts``, by how much."""
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v > before.get(k, 0.0)}


def distribute_after_garbage(api: PublisherClient, path: str) -> int:
    """The offset of a package distributed after the garbage (its node ``{path}/ok``)."""
    body = {
        "action": "ADD",
        "deepPaths": [path],
        "nodes": [{"path": f"{path}/ok", "properties": {"title": "after the garbage"}}],
    }
    return int(api.distribute(body)["offset"])
