"""The store's bookkeeping besides imports: statuses committed with a batch are sent after it
(and again after a crash left them unsent); the store is maintained one step at a time
(subscriber.maintenance.scheduler: purge of sent statuses, folds, checkpoints, compaction,
VACUUM), when a poll finds nothing and, for the steps that never hold an import, after each commit."""

from __future__ import annotations

import logging
from collections.abc import Callable

from journal.errors import JournalError
from journal.messaging import MessageSender
from journal.wire import messages as m
from subscriber.maintenance.scheduler import IDLE_CHECKPOINT_COMMITS, Maintenance, MaintenancePolicy
from subscriber.metrics import SubscriberMetrics
from subscriber.store.base import Store
from subscriber.writer.errors import WriterDeposed

log = logging.getLogger(__name__)

__all__ = ["IDLE_CHECKPOINT_COMMITS", "Bookkeeping"]


class Bookkeeping:
    def __init__(
        self,
        name: str,
        instance_id: Callable[[], str],
        store: Store,
        status: MessageSender,
        metrics: SubscriberMetrics,
        policy: MaintenancePolicy,
    ) -> None:
        self.name = name
        self.instance_id = instance_id
        self.store = store
        self.status = status
        self.metrics = metrics
        self.maintenance = Maintenance(name, store, policy, metrics)
        self.statuses_sent = 0

    @property
    def commits_since_purge(self) -> int:
        """Commits since sent statuses were purged (the import loop counts them here)."""
        return self.maintenance.commits_since_purge

    @commits_since_purge.setter
    def commits_since_purge(self, value: int) -> None:
        """Count a commit, and start a step of the maintenance thread if one is due: under a
        steady stream a poll never comes back empty, and the store would never be folded or
        checkpointed. It never holds the import (the purge and the retention wait for an idle
        poll)."""
        self.maintenance.commits_since_purge = value
        self._maintain(inline=False)

    def send_pending_statuses(self) -> None:
        state = self.store.state
        if state is None:
            return
        sent_up_to = None
        for offset, agent, status, sequence in list(state.pending_statuses):
            try:
                self.status.send(
                    m.PackageStatusMessage(
                        sub_sling_id=self.instance_id(),
                        sub_agent_name=self.name,
                        pub_agent_name=agent,
                        offset=offset,
                        status=status,  # the enum value name
                        sequence=sequence,
                    )
                )
            except JournalError as exc:
                log.warning("%s: status of offset %d not sent yet: %s", self.name, offset, exc)
                break
            self.statuses_sent += 1
            self.metrics.status_sent(status)
            sent_up_to = offset
        if sent_up_to is not None:
            state.pending_statuses = [s for s in state.pending_statuses if s[0] > sent_up_to]
            state.sent_statuses_up_to = sent_up_to

    def idle(self) -> None:
        """Housekeeping when a poll found nothing to import: one maintenance step, if one is
        due."""
        self._maintain(inline=True)

    def _maintain(self, *, inline: bool) -> None:
        """A failure is logged and tried again later; it never stops the import thread."""
        try:
            self.maintenance.step(inline=inline)
        except WriterDeposed:
            raise  # the import loop steps down
        except Exception:
            log.warning(
                "%s: store housekeeping failed; trying again later", self.name, exc_info=True
            )
