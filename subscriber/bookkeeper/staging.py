"""Staged (canary) import: a subscriber set to stage after named canary subscribers
(``staged_after``) imports a package only once each of them reported it on the status topic.

A canary reports every package it processed, in offset order (IMPORTED, REMOVED when cleared,
REMOVED_FAILED when it gave up): a status for the package's offset, or for a later one of the
same publisher agent, means the canary went past it. Only editable canaries send IMPORTED
statuses (as in Sling), so a canary must be editable; a REMOVED_FAILED comes from any.

* A package every canary went past is imported at once.
* Otherwise the import thread waits (state WAITING_FOR_CANARY, naming the canaries pending).
  After ``staged_wait_s`` it counts a wait timeout, logs it and waits again: a staged package
  is never given up or skipped for want of a status (a canary down holds its staged
  subscribers; an operator clears or resumes them, or stops staging them).
* A package a canary failed for good (REMOVED_FAILED at its offset) is held (state
  CANARY_FAILED, ``scd_canary_held`` 1): the content broke the canary. It stays held until an
  operator clears it (the clear command: skipped as REMOVED) or resumes the subscriber (the
  resume command: imported anyway).

The state lives in no file: the status topic is read from its earliest record at each start,
so a restarted staged subscriber holds or waits exactly as before.

Status records are not signed (subscribers have no signing key), so a record is weighed, not
trusted: it counts only when it is small (``MAX_STATUS_BYTES``), decodes with every required
field, names a configured canary and a followed publisher agent, has a known status, and
names an offset the package topic holds (a status beyond the log's end would pass packages
not written yet; it is re-checked once the log reached it). Whoever can write the status topic
can still claim a canary's status for an offset on the log; what a forged record can do
without that is hold, never release (docs/operations.md). Memory is bounded whatever the
topic holds: per canary and agent, one offset passed, ``MAX_AHEAD`` offsets beyond the log's
end and ``MAX_FAILED`` failed offsets (the lowest kept: those are the ones still to import).
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from journal.api import Record
from journal.errors import JournalError
from journal.wire import messages as m
from runtime.ratelog import RateLimitedLog
from subscriber.bookkeeper.commands import Commands
from subscriber.bookkeeper.decoding import Decoded
from subscriber.metrics import SubscriberMetrics

log = logging.getLogger(__name__)

# A PackageStatusMessage is two names, an instance id and two numbers: well under 1 KiB.
MAX_STATUS_BYTES = 1024
# Statuses claiming offsets beyond the log's end, kept to check again (the lowest): an honest
# one is only there when it was read before the log's end was refreshed.
MAX_AHEAD = 64
# Failed offsets kept per canary and agent (the lowest: the next packages to import).
MAX_FAILED = 10_000
# The log's end is asked again at most this often (a flood of high offsets costs few queries).
LOG_END_REFRESH_S = 0.05
# How often the waiting import thread looks at the statuses, a clear and a stop request.
WAIT_STEP_S = 0.05

_KNOWN = {m.Status.IMPORTED, m.Status.REMOVED, m.Status.REMOVED_FAILED}


@dataclass(frozen=True)
class Verdict:
    """Canaries that did not report the package yet, and those that failed it."""

    pending: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()

    @property
    def open(self) -> bool:
        return not self.pending and not self.failed


@dataclass
class _Reports:
    """What one canary reported for one publisher agent."""

    passed: int = -1  # highest offset reported that the log holds
    ahead: list[int] = field(default_factory=list)  # sorted, beyond the log's end when read
    failed: list[int] = field(default_factory=list)  # sorted REMOVED_FAILED offsets


class CanaryStatuses:
    """The canaries' statuses, fed by the status reader, asked by the import thread."""

    def __init__(
        self,
        canaries: Sequence[str],
        pub_agents: Sequence[str],
        log_end: Callable[[], int],
        metrics: SubscriberMetrics,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.canaries = tuple(canaries)
        self.pub_agents = frozenset(pub_agents)
        self._log_end = log_end  # the offset the next package record will get
        self.metrics = metrics
        self._clock = clock
        self._lock = threading.Lock()
        self._reports = {(c, a): _Reports() for c in self.canaries for a in self.pub_agents}
        self._end = 0  # the package topic's end, as last asked
        self._asked: float | None = None
        self._skipped = RateLimitedLog(log)

    def on_status(self, message: m.PackageStatusMessage, record: Record) -> None:
        reason = self._refused(message, record)
        if reason == "other":
            return  # another subscriber's: the topic is full of them
        if reason is not None:
            self.metrics.canary_status_ignored(reason)
            self._skipped.log(
                logging.WARNING, "status at offset %d ignored: %s", record.offset, reason
            )
            return
        offset, status = message.offset, message.status
        if offset >= self._end:
            self._refresh_end()  # an honest status is of a package written since the last ask
        with self._lock:
            reports = self._reports[(message.sub_agent_name, message.pub_agent_name)]
            if status == m.Status.REMOVED_FAILED:
                _insert(reports.failed, offset, MAX_FAILED)
            # Any status says the canary went past that offset: after a failure too.
            if offset <= reports.passed:
                return
            if offset < self._end:
                reports.passed = offset
            else:
                _insert(reports.ahead, offset, MAX_AHEAD)

    def _refused(self, message: m.PackageStatusMessage, record: Record) -> str | None:
        """Why a status record does not count (None: it does)."""
        if len(record.value) > MAX_STATUS_BYTES:
            return "oversized"
        if message.sub_agent_name not in self.canaries:
            return "other"
        if message.pub_agent_name not in self.pub_agents:
            return "agent"
        if message.status not in _KNOWN:
            return "status"
        if message.offset < 0:
            return "offset"
        return None

    def verdict(self, agent: str, offset: int) -> Verdict:
        """Whether every canary went past the package of ``agent`` at ``offset`` (import
        thread; offsets asked only grow, so failed offsets below it are forgotten)."""
        with self._lock:
            ahead = any(r.ahead for r in self._reports.values())
        if ahead or offset >= self._end:
            self._refresh_end()
        pending: list[str] = []
        failed: list[str] = []
        with self._lock:
            for canary in self.canaries:
                reports = self._reports.get((canary, agent))
                if reports is None:  # an agent this subscriber does not follow
                    pending.append(canary)
                    continue
                del reports.failed[: bisect.bisect_left(reports.failed, offset)]
                self._settle(reports)
                if reports.failed and reports.failed[0] == offset:
                    failed.append(canary)
                elif reports.passed < offset:
                    pending.append(canary)
        return Verdict(tuple(pending), tuple(failed))

    def _refresh_end(self) -> None:
        """Ask the log's end again, unless asked less than ``LOG_END_REFRESH_S`` ago."""
        now = self._clock()
        with self._lock:
            if self._asked is not None and now - self._asked < LOG_END_REFRESH_S:
                return
            self._asked = now
        try:
            end = self._log_end()
        except JournalError as exc:
            log.warning("the package topic's end is unknown, asked again later: %s", exc)
            return
        with self._lock:
            self._end = max(self._end, end)

    def _settle(self, reports: _Reports) -> None:
        """Offsets read beyond the log's end that it holds now count (under ``_lock``)."""
        held = bisect.bisect_left(reports.ahead, self._end)
        if held:
            reports.passed = max(reports.passed, reports.ahead[held - 1])
            del reports.ahead[:held]


def _insert(offsets: list[int], offset: int, limit: int) -> None:
    """Insert into a sorted list kept to its ``limit`` lowest offsets."""
    i = bisect.bisect_left(offsets, offset)
    if i < len(offsets) and offsets[i] == offset:
        return
    offsets.insert(i, offset)
    if len(offsets) > limit:
        offsets.pop()


class StagedImport:
    """The wait of the import thread for the canaries, and what it shows while it waits."""

    def __init__(
        self,
        statuses: CanaryStatuses,
        commands: Commands,
        wait_s: float,
        metrics: SubscriberMetrics,
        stop: threading.Event,
    ) -> None:
        self.statuses = statuses
        self.commands = commands
        self.wait_s = wait_s
        self.metrics = metrics
        self.stop = stop
        # (offset, verdict) of the package waited for; None when not waiting.
        self.waiting: tuple[int, Verdict] | None = None
        # Called when what it waits for changes (the agent announces it at once).
        self.on_change: Callable[[], None] = lambda: None

    def gated(self, decoded: Decoded) -> bool:
        """True for a package this subscriber would import: a followed agent's, decoded or
        failing for a reason a retry may mend (a permanent failure is not imported anyway)."""
        message = decoded.package_message
        return (
            message is not None
            and message.pub_agent_name in self.statuses.pub_agents
            and not decoded.permanent
            and not decoded.unknown
        )

    def wait(
        self,
        agent: str,
        offset: int,
        sequence: int,
        writing: Callable[[], bool] = lambda: True,
    ) -> None:
        """Return once every canary went past the package at ``offset``, a clear covers it,
        a resume released it from a canary's failure, the agent stops, or this process is no
        longer ``writing`` the store (its commit is then refused: it stands by)."""
        deadline = time.monotonic() + self.wait_s
        held_since: int | None = None  # resumes when the hold began
        try:
            while not self.stop.is_set() and writing():
                self.commands.persist()
                if self.commands.cleared(agent, offset, sequence):
                    log.info("offset %d cleared while waiting for the canaries", offset)
                    return
                verdict = self.statuses.verdict(agent, offset)
                if verdict.open and not self.commands.paused:  # paused: imports nothing
                    return
                if verdict.failed:
                    if held_since is None:
                        held_since = self.commands.resumes
                        self.metrics.canary_held.set(1)
                        log.error(
                            "offset %d of %s held: canaries %s failed it for good; clear it "
                            "or resume this subscriber to import it anyway",
                            offset,
                            agent,
                            ", ".join(verdict.failed),
                        )
                    elif self.commands.resumes != held_since:
                        log.warning("offset %d of %s imported on a resume", offset, agent)
                        return
                else:
                    held_since = None
                    self.metrics.canary_held.set(0)
                    # After the wait time: counted and logged, then waited again, never given up.
                    if verdict.pending and time.monotonic() >= deadline:
                        self.metrics.canary_wait_timeouts.inc()
                        log.warning(
                            "offset %d of %s: no status from canaries %s after %.0f s "
                            "(is each running, editable and following %s?); waiting again",
                            offset,
                            agent,
                            ", ".join(verdict.pending),
                            self.wait_s,
                            agent,
                        )
                        deadline = time.monotonic() + self.wait_s
                if self.waiting is None:
                    self.metrics.canary_waits.inc()
                changed = self.waiting is None or self.waiting[1] != verdict
                self.waiting = (offset, verdict)
                if changed:
                    self.on_change()
                self.metrics.canary_waiting.set(1)
                self.stop.wait(WAIT_STEP_S)
        finally:
            self.waiting = None
            self.metrics.canary_waiting.set(0)
            self.metrics.canary_held.set(0)
            self.on_change()

    def canaries(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(pending, failed) canaries of the package waited with; empty when not waiting."""
        waiting = self.waiting
        return (waiting[1].pending, waiting[1].failed) if waiting is not None else ((), ())

    @property
    def state(self) -> str | None:
        """CANARY_FAILED or WAITING_FOR_CANARY while waiting, else None."""
        waiting = self.waiting
        if waiting is None:
            return None
        return "CANARY_FAILED" if waiting[1].failed else "WAITING_FOR_CANARY"
