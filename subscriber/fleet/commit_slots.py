"""How many agents of one daemon open or commit their stores at once, and which goes first.

The agents of a daemon share its cores (one Spark driver, one Python process). A store's open
or commit is mostly CPU on the driver (building the rows, Delta's write and commit), which
Spark's scheduler pools do not order: with fifty agents committing at once each commit took
50-110 s on 2 cores, and a new agent's start (its claim, its open, its first import) was one
of fifty, ready only when the whole fleet had drained (bench/README.md, a hundred
subscribers). The slots let ``capacity`` (about one per core) run at a time; the others wait,
an agent that is not ready yet (subscriber.readiness: at start, or added by SIGHUP) ahead of
those that serve, otherwise in the order they came. An agent waits at most for the commits
ahead of it: none of them waits on another agent.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class CommitSlots:
    """At most ``capacity`` holders at a time; waiters that are starting go first."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {capacity}")
        self.capacity = capacity
        self._held = 0
        self._changed = threading.Condition()
        self._waiting: list[tuple[int, int]] = []  # heap of (0 starting / 1 serving, ticket)
        self._tickets = itertools.count()

    @contextmanager
    def hold(self, *, starting: bool) -> Iterator[None]:
        """Hold a slot for the block (waiting for one first)."""
        place = (0 if starting else 1, next(self._tickets))
        with self._changed:
            heapq.heappush(self._waiting, place)
            while self._held >= self.capacity or self._waiting[0] != place:
                self._changed.wait()
            heapq.heappop(self._waiting)
            self._held += 1
            self._changed.notify_all()  # the next in line may take another free slot
        try:
            yield
        finally:
            with self._changed:
                self._held -= 1
                self._changed.notify_all()

    @property
    def waiting(self) -> int:
        with self._changed:
            return len(self._waiting)
