"""Lag beyond retention: the package topic deleted offsets before this subscriber read them.

A subscriber stopped, or slower, for longer than the package topic's retention (7 days) would
resume at an offset the log no longer has, and both journal backends move on to the oldest
record left without a word (``Position.resolve`` clamps a start position; Kafka's
``auto.offset.reset`` moves a consumer whose position was deleted): the packages in between
would be lost silently. So the import loop asks ``LogGaps`` where to start (the next offset
against the topic's earliest one) and passes every record it polls through ``follows``, which
stops the batch at a record past the next offset. The package topic has one partition, but a
publisher's leader writes it in transactions, whose markers take offsets no consumer reads (an
aborted transaction's records too, unread by a read_committed consumer): so a hole counts as
records deleted before they were read only when the topic's earliest offset has passed its
start; a hole the log still holds is markers, and reading goes on after it.

At a gap the subscriber stops importing, keeps announcing its real processed offset and says
so: state BEHIND_LOG, ``/ready`` 503 naming the offsets, ``scd_behind_log`` 1, one ERROR line
per gap (not per poll). It checks again every ``recheck_s`` (say the operator restored the
topic), and resumes once a record follows its offset again.

It moves past a gap only when told, once: ``--accept-gap`` (``SCD_SUBSCRIBER_ACCEPT_GAP``)
accepts the gap at the offset where the process starts, and no other: the flag is spent by
the first record read or the first gap skipped, so a flag left in a configuration never skips
a gap that opens while the subscriber runs. A new store skips a gap at its start position the
same way (where it starts is no promise).

Where a new store starts is fixed when the process starts (``reset_position``: the log's end
for ``latest``, its start for ``earliest``), before Spark and the store open, which take tens
of seconds: a package distributed meanwhile is after that position and is imported. Resolved
once the store had opened, ``latest`` would skip every package sent while it opened, with
nothing saying so. Every gap skipped is committed to the store with its
range as the reason, logged as a warning and counted (``scd_log_gaps_total{action="skipped"}``,
``scd_skipped_gap_offsets_total``); a start with the flag set that finds no gap warns that the
flag should go.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from journal.api import Journal
from subscriber.metrics import SubscriberMetrics
from subscriber.settings import SubscriberSettings
from subscriber.store.base import Store

log = logging.getLogger(__name__)

ACCEPT_FLAG = "--accept-gap (SCD_SUBSCRIBER_ACCEPT_GAP)"


def reset_position(journal: Journal, settings: SubscriberSettings) -> int:
    """The offset a new store starts at, as of now: the package topic's end (``latest``: the
    next offset written) or its start (``earliest``). A store that already holds an offset
    resumes from it instead."""
    topic = settings.journal.topics.package
    if settings.reset == "latest":
        return journal.latest_offset(topic)
    return journal.earliest_offset(topic)


@dataclass(frozen=True)
class Gap:
    """Offsets ``first``..``last`` are gone from the package topic, unread."""

    first: int
    last: int

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    def __str__(self) -> str:
        return f"offsets {self.first}..{self.last} ({self.size} record{'s' * (self.size != 1)})"


class LogGaps:
    """Where the import loop may read from; the BEHIND_LOG state. Used by the polling thread
    (the import thread, or its prefetch while no other poll runs); ``behind`` is read by the
    health endpoint (one attribute, replaced whole)."""

    def __init__(
        self,
        settings: SubscriberSettings,
        journal: Journal,
        store: Store,
        metrics: SubscriberMetrics,
        start_offset: int | None = None,
    ) -> None:
        """``start_offset``: where a new store starts (``reset_position`` at process start);
        None: resolved when the store opens."""
        self.name = settings.agent_name
        self.settings = settings
        self.reset = settings.reset
        self.journal = journal
        self.topic = settings.journal.topics.package
        self.store = store
        self.metrics = metrics
        # Checked again on the beat of the discovery announcements.
        self.recheck_s = settings.announce_interval_s
        self.behind: Gap | None = None  # set while BEHIND_LOG
        self.pending: Gap | None = None  # found by a poll, not decided yet (``found``)
        # The operator's flag, until the first record read or gap skipped.
        self._accept = settings.accept_gap
        self._new_store = False  # a new store's start position, until the first record
        self._warned = False  # that the flag found no gap
        self._next = 0  # the offset the next polled record must have
        self._earliest: int | None = None  # the log's earliest offset after the last fetch
        self._checked_at = 0.0
        self.start_offset = start_offset  # a new store's start; read by the health endpoint
        self._fixed_when = "at process start" if start_offset is not None else "as it opened"

    # ------------------------------------------------------------------ the loop's questions
    def start(self, next_offset: int | None) -> int | None:
        """The offset to read from: ``next_offset``, or the earliest one past a gap this start
        may skip (recorded in the store first); None while behind the log. A new store
        (``next_offset`` None) starts at ``start_offset`` (``reset`` resolved at process
        start), recorded in it."""
        if next_offset is None:
            if self.start_offset is None:
                self.start_offset = reset_position(self.journal, self.settings)
            next_offset = self.start_offset
            self.store.record_offset(
                next_offset - 1, f"new store, reset to {self.reset} {self._fixed_when}"
            )
            log.info(
                "%s: new store starts at offset %d (%s, fixed %s)",
                self.name,
                next_offset,
                self.reset,
                self._fixed_when,
            )
            self._new_store = True
        earliest = self.journal.earliest_offset(self.topic)
        self.pending = None
        if next_offset < earliest:
            if not self.found(Gap(next_offset, earliest - 1)):
                return None
        elif self._accept and not self._warned:
            self._warned = True
            log.warning(
                "%s: %s is set but offset %d is on the package topic: no gap to accept. Remove "
                "it, or a gap found at a later start will be skipped without anyone deciding",
                self.name,
                ACCEPT_FLAG,
                next_offset,
            )
        self._next = max(next_offset, earliest)
        return self._next

    def fetched(self, offsets: list[int]) -> None:
        """A fetch returned records at ``offsets`` (in order): when they skip offsets (each of
        a publisher's transactions leaves a marker behind it), the log's earliest offset is
        read once, now, for ``follows`` to tell markers from records deleted by retention.
        Read after the fetch, it is at least what it was when the fetch ran (retention only
        raises it): a hole it does not reach was markers then too. Once per fetch, not per
        hole: a fetch of a transactional log has a hole behind every batch of records."""
        expected = self._next
        for offset in offsets:
            if offset > expected:
                self._earliest = self.journal.earliest_offset(self.topic)
                return
            expected = offset + 1

    def follows(self, offset: int) -> bool:
        """True when the record at ``offset`` is the next one; False at a gap before it
        (``pending``, for ``found``): nothing at or past a gap is imported before that."""
        if self.pending is not None:
            return False
        if offset > self._next:
            earliest = self._earliest
            if earliest is None:  # not fetched through ``fetched``
                earliest = self.journal.earliest_offset(self.topic)
            if earliest > self._next:  # deleted by retention (markers may follow them)
                self.pending = Gap(self._next, offset - 1)
                return False
            # Transaction markers (or aborted records): offsets on the log, no package.
        self._next = offset + 1
        if self._accept or self._new_store or self.behind is not None:
            self._reading(offset)
        return True

    def found(self, gap: Gap) -> bool:
        """A gap before the next offset: True when skipped (the store records it), False when
        the subscriber is behind the log (BEHIND_LOG) until a later check."""
        self.pending = None
        if self._accept or self._new_store:
            self._skip(gap)
            return True
        if self.behind is None or self.behind.first != gap.first:
            log.error(
                "%s: BEHIND_LOG: %s of the package topic were deleted by retention before this "
                "subscriber imported them; importing stopped. Reseed its store from a healthy "
                "subscriber's, or restart it with %s to continue from offset %d without them "
                "(docs/content-store.md: lag beyond retention)",
                self.name,
                gap,
                ACCEPT_FLAG,
                gap.last + 1,
            )
            self.metrics.log_gap("stopped")
        self.behind = gap  # the range grows while retention goes on
        self.metrics.behind_log.set(1)
        self._checked_at = time.monotonic()
        return False

    def recheck_due(self) -> bool:
        return time.monotonic() - self._checked_at >= self.recheck_s

    def reason(self) -> str | None:
        """Why the subscriber is not ready while behind the log (None: it is not)."""
        gap = self.behind
        if gap is None:
            return None
        return (
            f"behind the log: {gap} were deleted from the package topic before this subscriber "
            f"imported them; reseed its store or restart it with {ACCEPT_FLAG}"
        )

    # ------------------------------------------------------------------ internals
    def _skip(self, gap: Gap) -> None:
        if self._accept:
            reason = (
                f"gap accepted: {gap} were deleted by retention before this subscriber read them"
            )
            how = f"accepted by {ACCEPT_FLAG}"
        else:
            reason = f"new store: {gap} were deleted by retention before it read them"
            how = "a new store starts where the log starts"
        self.store.record_offset(gap.last, reason)
        log.warning("%s: %s; continuing from offset %d (%s)", self.name, reason, gap.last + 1, how)
        self.metrics.log_gap("skipped", gap.size)
        self._accept = self._new_store = False  # one gap, where this process started
        self._next = gap.last + 1
        self._resume()

    def _reading(self, offset: int) -> None:
        self._accept = self._new_store = False  # past the start: later gaps stop the import
        if self.behind is not None:
            log.info("%s: offset %d is on the log again; importing resumes", self.name, offset)
        self._resume()

    def _resume(self) -> None:
        self.behind = None
        self.metrics.behind_log.set(0)
