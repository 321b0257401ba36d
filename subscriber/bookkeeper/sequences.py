"""Replays refused: the sequence check of package records (journal/sequence.py).

The store keeps, in the same commit as the content, the last sequence number applied per
publisher agent (``StoreState.sequences``). A package record numbered at or below it, or below
a number of its own batch, was applied already: a copy of an old record (a signed one still
verifies) or one written out of order. It is skipped: not imported, not retried, no status;
counted in ``scd_replayed_records_total{kind="package"}`` and logged with both positions. So a
retracted page never comes back by a copied ADD, and a copied DELETE removes nothing again.

A number more than one above the last means packages of that agent are missing from the log:
the record is imported (what follows stays fresh) and the gap reported as a lag beyond
retention is: state SEQUENCE_GAP, ``/ready`` 503 naming the numbers, ``scd_sequence_gap`` 1,
``scd_sequence_gaps_total``, one ERROR line per gap. It stays until the subscriber restarts,
after an operator looked at it (reseed the store from a healthy subscriber if the packages
matter). Records without a number (0: older publishers, Sling) are not checked.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from runtime.ratelog import RateLimitedLog
from subscriber.metrics import SubscriberMetrics
from subscriber.store.base import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SequenceGap:
    """Numbers ``first``..``last`` of ``agent`` never reached this subscriber."""

    agent: str
    first: int
    last: int
    offset: int  # of the record past the gap

    def __str__(self) -> str:
        count = self.last - self.first + 1
        return (
            f"sequence numbers {self.first}..{self.last} of {self.agent} ({count} "
            f"package{'s' * (count != 1)}) are missing before offset {self.offset}"
        )


class SequenceCheck:
    """Decides per numbered package record: apply, or skip as a replay (import thread only;
    ``gap`` is read by the health endpoint, replaced whole)."""

    def __init__(self, name: str, store: Store, metrics: SubscriberMetrics) -> None:
        self.name = name
        self.store = store
        self.metrics = metrics
        self.gap: SequenceGap | None = None
        self.replays = 0
        # A flood of copies is one line per 10 s.
        self._replayed = RateLimitedLog(log)

    def last(self, agent: str, pending: Mapping[str, int]) -> int:
        """The last number of ``agent`` applied, by the store or the batch in progress."""
        state = self.store.state
        stored = state.sequences.get(agent, 0) if state is not None else 0
        return max(stored, pending.get(agent, 0))

    def admit(self, agent: str, number: int, offset: int, pending: Mapping[str, int]) -> bool:
        """True: apply the record at ``offset`` numbered ``number``; False: a replay, skip it.
        ``pending``: the numbers of the batch in progress (``ChangeSet.sequences``)."""
        if number <= 0:
            return True
        last = self.last(agent, pending)
        if number <= last:
            self.replays += 1
            self.metrics.replayed("package")
            self._replayed.log(
                logging.WARNING,
                "%s: skipped a replayed package record at offset %d: sequence %d of %s, at or "
                "below %d, the last one applied",
                self.name,
                offset,
                number,
                agent,
                last,
            )
            return False
        if last and number > last + 1:
            self._gap(SequenceGap(agent, last + 1, number - 1, offset))
        return True

    def reason(self) -> str | None:
        """Why the subscriber is not ready while a gap is reported (None: it is ready)."""
        gap = self.gap
        if gap is None:
            return None
        return f"sequence gap: {gap}; reseed the store, or restart the subscriber to go on"

    def _gap(self, gap: SequenceGap) -> None:
        if self.gap is not None and (self.gap.agent, self.gap.first) == (gap.agent, gap.first):
            return  # the same record, tried again
        log.error(
            "%s: SEQUENCE_GAP: %s (never on the log this subscriber reads, or written out of "
            "order); importing goes on. Reseed the store from a healthy subscriber's if they "
            "matter (docs/security.md: replays)",
            self.name,
            gap,
        )
        self.gap = gap
        self.metrics.sequence_gap.set(1)
        self.metrics.sequence_gaps.inc()
