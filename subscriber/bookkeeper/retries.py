"""Retrying a package that failed for a reason a retry may mend (journal, blob store or Spark
unavailable; a blob not there yet).

The package is attempted again after a back-off (RetryPolicy) until it imports, a clear covers
it, the agent stops (it is then retried after the restart), or, with max_retries >= 0, its
attempts are used up and it is skipped as REMOVED_FAILED. With max_retries = -1 (Sling's
default) the subscriber blocks on it: nothing after it is imported meanwhile. Permanent
failures never come here (subscriber.bookkeeper.decoding).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from journal.wire import messages as m
from subscriber.bookkeeper.commands import Commands
from subscriber.bookkeeper.failures import FailureReporter
from subscriber.errors import AttemptFailed, Stopped, WriterDeposed
from subscriber.metrics import SubscriberMetrics
from subscriber.readiness import Readiness

log = logging.getLogger(__name__)

# Granularity of interruptible waits: how fast a clear command or a stop request is noticed
# while the import thread sleeps between attempts.
WAIT_STEP_S = 0.05


@dataclass(frozen=True)
class RetryPolicy:
    initial_s: float
    max_s: float
    max_retries: int  # < 0: retry forever (block); otherwise give up after that many retries

    def delay(self, failed_attempts: int) -> float:
        """Pause after the given number of failed attempts (1 -> initial)."""
        # 2.0 ** 1024 raises OverflowError, which a package retried forever (max_retries -1)
        # reached after 1024 attempts; a product too large for a float is inf, min() max_s.
        growth = 2.0 ** min(max(failed_attempts - 1, 0), 1023)
        return min(self.initial_s * growth, self.max_s)

    def gives_up(self, failed_attempts: int) -> bool:
        """True once the package has used all its attempts (max_retries + 1 in total)."""
        return self.max_retries >= 0 and failed_attempts > self.max_retries


# (offset, pub agent, status or None, sequence number): commit a skip of the package at offset;
# its number counts as applied, so the package after it is no sequence gap.
Skip = Callable[[int, str, int | None, int], None]


class Retries:
    def __init__(
        self,
        policy: RetryPolicy,
        *,
        editable: bool,
        commands: Commands,
        reporter: FailureReporter,
        metrics: SubscriberMetrics,
        readiness: Readiness,
        stop: threading.Event,
        skip: Skip,
    ) -> None:
        self.policy = policy
        self.editable = editable
        self.commands = commands
        self.reporter = reporter
        self.metrics = metrics
        self.readiness = readiness
        self.stop = stop
        self.skip = skip
        self.attempts = 0  # failed attempts of the package being retried (0 when none)
        self.failed_attempts = 0
        self.removed_failed = 0
        self.cleared = 0

    def retry(
        self,
        offset: int,
        pub_agent: str,
        pkg_id: str,
        cause: BaseException,
        attempt: Callable[[], None],
        sequence: int = 0,
    ) -> None:
        """Retry until the package imports, is given up, cleared, or the agent stops."""
        attempts = 0
        while True:
            attempts += 1
            self._set_attempts(attempts)
            self.failed_attempts += 1
            self.metrics.import_failed(retriable=True)
            self.reporter.report(
                offset, pub_agent, pkg_id, cause, attempt=attempts, sequence=sequence
            )
            if self.policy.gives_up(attempts):
                log.error(
                    "giving up on offset %d of %s after %d attempts", offset, pub_agent, attempts
                )
                self.skip(offset, pub_agent, m.Status.REMOVED_FAILED, sequence)
                self.removed_failed += 1
                break
            if not self.wait_or_cleared(offset, pub_agent, sequence, self.policy.delay(attempts)):
                if self.stop.is_set():
                    break  # not committed: retried after restart
                status = m.Status.REMOVED if self.editable else None
                self.skip(offset, pub_agent, status, sequence)
                self.cleared += 1
                break
            try:
                attempt()
                break
            except WriterDeposed:
                self._set_attempts(0)  # another process imports it now
                raise
            except Stopped:
                self._set_attempts(0)  # not attempted: retried after restart
                raise
            except AttemptFailed as exc:
                cause = exc.cause
            except Exception as exc:
                cause = exc
        self._set_attempts(0)
        self.reporter.on_report()

    def wait_or_cleared(self, offset: int, pub_agent: str, sequence: int, delay_s: float) -> bool:
        """Sleep ``delay_s``, and on while paused (a paused subscriber attempts nothing); False
        early when stopping or when a clear covers ``offset``."""
        deadline = time.monotonic() + delay_s
        while True:
            if self.stop.is_set():
                return False
            self.commands.persist()
            if self.commands.cleared(pub_agent, offset, sequence):
                log.info("offset %d cleared while being retried", offset)
                return False
            left = deadline - time.monotonic()
            if self.commands.paused:
                left = WAIT_STEP_S
            elif left <= 0:
                return True
            self.stop.wait(min(WAIT_STEP_S, left))

    def _set_attempts(self, attempts: int) -> None:
        self.attempts = attempts
        self.metrics.current_retries.set(attempts)
        self.readiness.on_retries(attempts)
