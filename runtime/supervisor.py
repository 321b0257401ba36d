"""Supervised background threads: a long-running loop that survives any exception.

A ``SupervisedThread`` runs a loop function (one that returns only once its stop event is set)
and, when it raises, logs the exception with its traceback, counts it in
``scd_thread_restarts_total{thread=...}``, waits a back-off and calls it again. Between the
failure and the restart the thread counts as *down*; a ``Supervisor`` collects the threads of
one agent so that its readiness endpoint can answer 503 while one is down.

Decisions:

* ``Exception`` is caught, ``BaseException`` is not: ``SystemExit`` raised in a thread is a
  deliberate request to end it, and ``KeyboardInterrupt`` only reaches the main thread. A
  thread that ends that way without being stopped stays down for good (readiness reports it).
* A loop that returns before its stop event is set has ended unexpectedly: it is restarted and
  counted like a failure, so a thread never silently disappears. An exception raised once the
  stop event is set (a client closed under the loop) ends the thread quietly.
* The back-off doubles from 0.1 s up to 30 s across consecutive failures and starts again from
  0.1 s once the loop ran for a healthy period (60 s) before failing: a persistent failure does
  not flood the log, a rare one is retried at once.
* The restart counter is one process-wide metric (thread names are the label); each agent's
  registry exposes it through ``register_metrics``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Self

from prometheus_client import CollectorRegistry, Counter

log = logging.getLogger(__name__)

# Not registered in prometheus_client's default registry: each agent owns its registry
# (publisher/metrics.py, subscriber/metrics.py) and adds this collector to it, so several agents
# in one process (tests, embedded mode) all expose it without a duplicate registration.
THREAD_RESTARTS = Counter(
    "scd_thread_restarts",
    "Background threads restarted after an exception (or an unexpected return)",
    ["thread"],
    registry=None,
)


def register_metrics(registry: CollectorRegistry) -> None:
    """Expose the process-wide thread restart counter in ``registry`` (once per registry)."""
    registry.register(THREAD_RESTARTS)


@dataclass(frozen=True)
class Backoff:
    """Pause before restarting a failed loop: ``initial_s * factor**n`` for the n-th
    consecutive failure, at most ``max_s``; a loop that ran ``healthy_s`` resets n."""

    initial_s: float = 0.1
    max_s: float = 30.0
    factor: float = 2.0
    healthy_s: float = 60.0

    def delay_s(self, consecutive_failures: int) -> float:
        # Bounded exponent: the float power of a long crash loop must not overflow.
        exponent = min(consecutive_failures, 64)
        return float(min(self.max_s, self.initial_s * self.factor**exponent))


DEFAULT_BACKOFF = Backoff()


class SupervisedThread:
    """Runs ``target`` in a daemon thread until ``stop`` is set, restarting it on failure."""

    def __init__(
        self,
        name: str,
        target: Callable[[], None],
        *,
        stop: threading.Event | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
    ) -> None:
        self.name = name
        self.stop_event = stop if stop is not None else threading.Event()
        self.backoff = backoff
        self._target = target
        self._thread = threading.Thread(target=self._supervise, name=name, daemon=True)
        self._down = False
        self._restarts = 0
        self._last_error: str | None = None

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self, timeout_s: float | None = None) -> None:
        """Set the stop event and wait up to ``timeout_s`` for the loop to return."""
        self.stop_event.set()
        self.join(timeout_s)

    def join(self, timeout_s: float | None = None) -> None:
        if self._thread.ident is not None:
            self._thread.join(timeout_s)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def down(self) -> bool:
        """Failed and not restarted yet, or ended without being stopped."""
        return self._down

    @property
    def restarts(self) -> int:
        """Failures (exceptions, unexpected returns) this thread had so far."""
        return self._restarts

    @property
    def last_error(self) -> str | None:
        """The type of the last failure (never its message: it may quote a secret)."""
        return self._last_error

    def _supervise(self) -> None:
        consecutive = 0
        try:
            while not self.stop_event.is_set():
                started = time.monotonic()
                self._down = False
                try:
                    self._target()
                except Exception as exc:
                    if self.stop_event.is_set():
                        # Failing while it stops (a client closed under it) is no fault.
                        log.info("thread %s failed while stopping", self.name, exc_info=exc)
                        return
                    error: Exception | None = exc
                    self._last_error = type(exc).__name__
                else:
                    if self.stop_event.is_set():
                        return
                    error = None
                    self._last_error = "returned"
                if time.monotonic() - started >= self.backoff.healthy_s:
                    consecutive = 0
                delay = self.backoff.delay_s(consecutive)
                consecutive += 1
                self._down = True
                self._restarts += 1
                THREAD_RESTARTS.labels(self.name).inc()
                what = "failed" if error is not None else "returned before being stopped"
                log.error(
                    "thread %s %s; restarting in %.2f s",
                    self.name,
                    what,
                    delay,
                    exc_info=error,
                    extra={"supervised_thread": self.name, "restart_in_s": delay},
                )
                if self.stop_event.wait(delay):
                    return
        finally:
            # Ended without a stop: a BaseException escaped. Nobody restarts it any more.
            if not self.stop_event.is_set():
                self._down = True
                log.critical("thread %s ended and will not be restarted", self.name)
            else:
                self._down = False


class Supervisor:
    """The supervised threads of one agent: spawns them, stops them, reports the down ones."""

    def __init__(self, stop: threading.Event | None = None) -> None:
        self.stop_event = stop if stop is not None else threading.Event()
        self._threads: list[SupervisedThread] = []
        self._lock = threading.Lock()

    def spawn(
        self,
        name: str,
        target: Callable[[], None],
        *,
        stop: threading.Event | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
    ) -> SupervisedThread:
        """Start ``target`` supervised (stopped by ``stop``, default the supervisor's)."""
        thread = SupervisedThread(
            name, target, stop=stop if stop is not None else self.stop_event, backoff=backoff
        )
        self.watch(thread.start())
        return thread

    def watch(self, *threads: SupervisedThread | None) -> None:
        """Count threads started elsewhere (a component's own) in ``down``; None is skipped."""
        with self._lock:
            self._threads.extend(t for t in threads if t is not None)

    @property
    def threads(self) -> list[SupervisedThread]:
        with self._lock:
            return list(self._threads)

    def down(self) -> list[SupervisedThread]:
        return [t for t in self.threads if t.down]

    def health(self) -> tuple[bool, str]:
        """(False, which threads are down and why) while one is down, else (True, ...)."""
        down = self.down()
        if not down:
            return True, f"{len(self.threads)} threads running"
        names = ", ".join(f"{t.name} ({t.last_error}, {t.restarts} restarts)" for t in down)
        return False, f"thread down: {names}"

    def stop(self, timeout_s: float | None = None) -> None:
        """Set every thread's stop event (a watched component's too) and join them all
        (``timeout_s`` each)."""
        self.stop_event.set()
        for thread in self.threads:
            thread.stop_event.set()
        self.join(timeout_s)

    def join(self, timeout_s: float | None = None) -> None:
        for thread in self.threads:
            thread.join(timeout_s)
