"""How long a subscriber took to start serving, phase by phase: ``start`` in ``/health``.

An autoscaler waits for a new instance to serve; where that time goes decides what to make
faster. Each milestone is the wall-clock seconds since the process started (the kernel's
start time, so the interpreter's start and imports count), set once, the first time it is
reached: ``process`` (settings read, imports done), ``journal`` (the start positions fixed on
the log), ``spark`` (the Spark session up: the JVM's start), then per agent ``lease`` (the
store's writer lease held and the store claimed), ``store_open`` (the store's state read),
``caught_up`` (ready: subscriber.readiness) and ``reads`` (the read model answers). A phase
not reached yet is absent. Wall-clock, as readiness is: both compare with the process start.
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["StartReport", "process_started"]


def process_started() -> float:
    """The epoch seconds at which this process started (now where /proc does not say)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            # Field 22, after the command name in parentheses (which may hold spaces): clock
            # ticks since boot.
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as f:
            up = float(f.read().split()[0])  # hundredths; /proc/stat's btime is whole seconds
        return time.time() - max(0.0, up - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.time()


class StartReport:
    """Milestones of a start; ``parent``'s (the process's) come first in ``phases``."""

    def __init__(self, started: float | None = None, parent: StartReport | None = None) -> None:
        self.started: float
        if parent is not None:
            self.started = parent.started
        else:
            self.started = started if started is not None else process_started()
        self._parent = parent
        self._lock = threading.Lock()
        self._at: dict[str, float] = {}

    def child(self) -> StartReport:
        """A report of one agent, sharing this (the process's) milestones."""
        return StartReport(parent=self)

    def mark(self, phase: str, at: float | None = None) -> None:
        """``phase`` reached now (or at epoch ``at``); later marks of it are ignored."""
        when = time.time() if at is None else at
        with self._lock:
            self._at.setdefault(phase, round(max(0.0, when - self.started), 3))

    def phases(self) -> dict[str, float]:
        """Seconds since the process started, by milestone, in the order reached."""
        inherited = self._parent.phases() if self._parent is not None else {}
        with self._lock:
            return {**inherited, **self._at}
