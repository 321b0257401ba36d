"""How many agents of one daemon open or commit their stores at once, and which goes first.

The agents of a daemon share its cores (one Spark driver, one Python process). A store's open or
commit is mostly CPU on the driver (building the rows, Delta's write and commit), which Spark's
scheduler pools do not order: with fifty agents committing at once on 2 cores each commit took the
time of fifty, and a new agent's start (its claim, its open, its first import) was one of fifty,
ready only when the whole fleet had drained. The slots let ``capacity`` (about one per core) run at
a time; the others wait, an agent that is not ready yet (subscriber.readiness: at start, or added by
SIGHUP) ahead of those that serve, otherwise in the order they came. An agent waits at most for the
commits ahead of it: none of them waits on another agent. One agent's store that hangs (an S3 server
that stopped answering) must not stop the others (its commit is bounded by the store's timeouts,
minutes on s3a): a holder that has held its slot for ``stalled_s`` no longer counts against the
capacity, and the next waiter goes. An agent that stops while it waits gives up its place
(``Stopped``): the work it waited for is not done, and its records are read again from the store's
offset when it runs again, so a leaving agent never waits for the fleet.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from subscriber.errors import Stopped

# A commit of a small store takes well under a second on an idle machine
# (docs/benchmarks.md#subscriber_longrun) and many times that on saturated cores; one that
# holds its slot longer is taken as hung.
DEFAULT_STALLED_S = 60.0
# How soon a waiter notices its agent's stop event (an Event cannot wake a Condition).
STOP_CHECK_S = 0.5


class CommitSlots:
    """At most ``capacity`` holders at a time, not counting those that have held their slot
    for ``stalled_s``; waiters that are starting go first."""

    def __init__(
        self,
        capacity: int,
        stalled_s: float = DEFAULT_STALLED_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {capacity}")
        self.capacity = capacity
        self.stalled_s = stalled_s
        self._clock = clock
        self._holders: dict[int, float] = {}  # ticket -> when it took its slot
        self._changed = threading.Condition()
        self._waiting: list[tuple[int, int]] = []  # heap of (0 starting / 1 serving, ticket)
        self._tickets = itertools.count()

    @contextmanager
    def hold(self, *, starting: bool, stop: threading.Event | None = None) -> Iterator[None]:
        """Hold a slot for the block (waiting for one first). Raises ``Stopped`` when ``stop``
        is set while it waits."""
        ticket = next(self._tickets)
        place = (0 if starting else 1, ticket)
        with self._changed:
            heapq.heappush(self._waiting, place)
            while (wait := self._wait_s(place)) != 0.0:
                if stop is not None:
                    if stop.is_set():
                        self._leave(place)
                        raise Stopped("stopped while waiting for a commit slot")
                    wait = STOP_CHECK_S if wait is None else min(wait, STOP_CHECK_S)
                self._changed.wait(wait)
            heapq.heappop(self._waiting)
            self._holders[ticket] = self._clock()
            self._changed.notify_all()  # the next in line may take another free slot
        try:
            yield
        finally:
            with self._changed:
                del self._holders[ticket]
                self._changed.notify_all()

    def _leave(self, place: tuple[int, int]) -> None:
        """Take a waiter out of the line (the next one may be first now)."""
        self._waiting.remove(place)
        heapq.heapify(self._waiting)
        self._changed.notify_all()

    def _wait_s(self, place: tuple[int, int]) -> float | None:
        """0 when ``place`` may take a slot now; else how long until a holder counts as
        stalled (None: until the slots change)."""
        if self._waiting[0] != place:
            return None
        now = self._clock()
        ends = [since + self.stalled_s - now for since in self._holders.values()]
        counted = [end for end in ends if end > 0]
        if len(counted) < self.capacity:
            return 0.0
        return min(counted)

    @property
    def waiting(self) -> int:
        with self._changed:
            return len(self._waiting)
