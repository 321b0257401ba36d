"""When a subscriber counts as ready to serve: Sling's readiness rules, each configurable.

A new instance (say one an autoscaler just started from a cloned store) should take traffic
only once its content is about current. It becomes ready on the first of:

* caught up: everything before the log's end as it was when the store opened is imported (or
  skipped, or transaction markers): what an autoscaler waits for, and usually the first rule
  to fire;
* idle: polls found nothing to import for ``idle_s`` without interruption (caught up);
* recent: it imported a package published less than ``max_message_age_s`` ago (nearly caught
  up: what is left to import is younger than that);
* retries: one package failed more than ``max_retries`` times (content will not get more
  current by waiting; blocking readiness on it would keep the instance out for good);
* forced: ``force_ready_s`` passed since start, whatever happens.

A paused subscriber (subscriber.bookkeeper.commands) is not idle: it is not caught up, so only
the forced rule makes it ready while paused; the idle time starts again after the resume.

Once ready it stays ready, as in Sling: readiness is about the start, and an instance that
served traffic must not flap out of the load balancer when a burst of packages arrives. A
background thread that is down is another matter: ``supervised_check`` makes the endpoint
answer 503 while one is (runtime/supervisor.py), whatever these rules say.

All times are wall-clock seconds (``time.time``) because a package's age compares its
publisher's wall-clock creation time with ours; a clock step can only make a rule fire
earlier or later by the size of the step. The agent thread feeds events while the health
endpoint's thread checks, so every method takes a lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from runtime.supervisor import Supervisor

log = logging.getLogger(__name__)

# Sling's defaults (SubscriberIdle): idle 10 s, message age 120 s, more than 10 retries,
# forced after 5 minutes.
# 10 s without a record: polls come back empty within a second when caught up, so ten seconds
# of nothing means the log has been drained, not that a poll was merely slow.
DEFAULT_IDLE_S = 10.0
# 2 minutes: content that lags the author by less than this is acceptable to serve.
DEFAULT_MAX_MESSAGE_AGE_S = 120.0
# More than 10 failed retries of one package: it will not import soon; stop waiting on it.
DEFAULT_MAX_RETRIES = 10
# 5 minutes: an upper bound on how long an instance can stay out of service.
DEFAULT_FORCE_READY_S = 300.0


ReadinessCheck = Callable[[], tuple[bool, str]]


def supervised_check(check: ReadinessCheck, supervisor: Supervisor) -> ReadinessCheck:
    """``check`` (say ``Readiness.check``), but (False, which thread) while one of
    ``supervisor``'s threads is down: a subscriber whose import loop is down serves stale
    content."""

    def checked() -> tuple[bool, str]:
        ready, reason = check()  # first: its timers still fire while a thread is down
        threads_ok, threads = supervisor.health()
        return (ready, reason) if threads_ok else (False, threads)

    return checked


class ReadyReason(StrEnum):
    CAUGHT_UP = "caught_up"
    IDLE = "idle"
    RECENT = "recent"
    RETRIES = "retries"
    FORCED = "forced"


@dataclass(frozen=True)
class ReadinessRules:
    """Thresholds of the readiness rules; ``None`` (``False``) turns a rule off."""

    caught_up: bool = True
    idle_s: float | None = DEFAULT_IDLE_S
    max_message_age_s: float | None = DEFAULT_MAX_MESSAGE_AGE_S
    max_retries: int | None = DEFAULT_MAX_RETRIES
    force_ready_s: float | None = DEFAULT_FORCE_READY_S

    def __post_init__(self) -> None:
        for name in ("idle_s", "max_message_age_s", "max_retries", "force_ready_s"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"readiness rule {name} must be >= 0 or None, got {value}")


class Readiness:
    """Fed by the agent loop, checked by the health endpoint."""

    def __init__(
        self,
        rules: ReadinessRules | None = None,
        *,
        clock: Callable[[], float] = time.time,
        started: float | None = None,
    ) -> None:
        self.rules = rules if rules is not None else ReadinessRules()
        self._clock = clock
        self._lock = threading.Lock()
        self.started = started if started is not None else clock()
        self._idle_since: float | None = None
        self._end: int | None = None  # the log's end when the store opened
        self._paused = False
        self._ready_at: float | None = None
        self._reason: ReadyReason | None = None
        self._detail = ""

    # ------------------------------------------------------------------ events
    def expect_end(self, end: int) -> None:
        """The log's end (the offset its next record gets) as the store opens; the first one
        given counts, so reopening after a journal error does not move the goal."""
        with self._lock:
            if self._end is None:
                self._end = end

    def on_position(self, next_offset: int, now: float | None = None) -> None:
        """Every record before ``next_offset`` is imported, skipped or a transaction marker."""
        now = self._now(now)
        with self._lock:
            end = self._end
            if not self.rules.caught_up or end is None or self._paused or next_offset < end:
                return
            self._set_ready(
                ReadyReason.CAUGHT_UP, now, f"caught up to offset {end}, the log's end at start"
            )

    def on_poll(self, records: int, now: float | None = None) -> None:
        """A poll returned ``records`` records (0: nothing to import, the log is drained)."""
        now = self._now(now)
        with self._lock:
            self._paused = False
            if records > 0:
                self._idle_since = None
            elif self._idle_since is None:
                self._idle_since = now

    def on_paused(self) -> None:
        """The subscriber is paused: not idle (polls after the resume start the idle time)."""
        with self._lock:
            self._paused = True
            self._idle_since = None

    def on_imported(self, created_ms: int, now: float | None = None) -> None:
        """A package published at ``created_ms`` (epoch ms; 0 = unknown) was imported."""
        now = self._now(now)
        limit = self.rules.max_message_age_s
        if created_ms <= 0 or limit is None:
            return
        age = now - created_ms / 1000
        with self._lock:
            if age < limit:
                self._set_ready(
                    ReadyReason.RECENT, now, f"imported a package {age:.1f} s old (< {limit:g} s)"
                )

    def on_retries(self, retries: int, now: float | None = None) -> None:
        """The package being imported has failed ``retries`` times so far (0 after success)."""
        now = self._now(now)
        limit = self.rules.max_retries
        with self._lock:
            if retries > 0:
                self._idle_since = None  # retrying is work, not idleness
            if limit is not None and retries > limit:
                self._set_ready(
                    ReadyReason.RETRIES, now, f"{retries} retries of one package (> {limit})"
                )

    # ------------------------------------------------------------------ queries
    def check(self, now: float | None = None) -> tuple[bool, str]:
        """(ready, reason): why it is ready, or what it is still waiting for."""
        now = self._now(now)
        with self._lock:
            if self._ready_at is None:
                self._check_timers(now)
            if self._ready_at is not None:
                return True, f"ready ({self._reason}): {self._detail}"
            return False, self._waiting(now)

    @property
    def reason(self) -> ReadyReason | None:
        with self._lock:
            return self._reason

    @property
    def starting(self) -> bool:
        """True until the agent is ready (it then stays ready)."""
        with self._lock:
            return self._ready_at is None

    @property
    def ready_at(self) -> float | None:
        """The epoch seconds at which it became ready; None while not ready."""
        with self._lock:
            return self._ready_at

    @property
    def ready_after_s(self) -> float | None:
        """Seconds from start until ready; None while not ready."""
        with self._lock:
            return None if self._ready_at is None else self._ready_at - self.started

    # ------------------------------------------------------------------ internals
    def _now(self, now: float | None) -> float:
        return self._clock() if now is None else now

    def _check_timers(self, now: float) -> None:
        idle_s, force_s = self.rules.idle_s, self.rules.force_ready_s
        if idle_s is not None and self._idle_since is not None:
            idle_for = now - self._idle_since
            if idle_for >= idle_s:
                self._set_ready(ReadyReason.IDLE, now, f"idle for {idle_for:.1f} s")
                return
        if force_s is not None and now - self.started >= force_s:
            self._set_ready(ReadyReason.FORCED, now, f"forced after {force_s:g} s")

    def _waiting(self, now: float) -> str:
        parts = ["not ready: "]
        if self._paused:
            parts.append("paused")
        elif self._idle_since is None:
            parts.append("importing")
        else:
            parts.append(f"idle for {now - self._idle_since:.1f} s")
        if self.rules.caught_up and self._end is not None:
            parts.append(f" (ready at offset {self._end}, the log's end at start)")
        if self.rules.idle_s is not None:
            parts.append(f" (ready after {self.rules.idle_s:g} s idle)")
        if self.rules.force_ready_s is not None:
            left = self.started + self.rules.force_ready_s - now
            parts.append(f"; forced ready in {left:.0f} s")
        return "".join(parts)

    def _set_ready(self, reason: ReadyReason, now: float, detail: str) -> None:
        if self._ready_at is not None:
            return
        self._ready_at, self._reason, self._detail = now, reason, detail
        log.info("subscriber ready after %.1f s (%s): %s", now - self.started, reason, detail)
