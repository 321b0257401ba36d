"""The store's bookkeeping besides imports: statuses committed with a batch are sent after it
(and again after a crash left them unsent), sent statuses are purged, and the Delta log is
checkpointed, while the agent is idle."""

from __future__ import annotations

import logging
from collections.abc import Callable

from journal.errors import JournalError
from journal.messaging import MessageSender
from journal.wire import messages as m
from subscriber.metrics import SubscriberMetrics
from subscriber.store import Store

log = logging.getLogger(__name__)

# An idle agent checkpoints its store once this many commits were made since the last
# checkpoint: Delta's default interval, so readers replay no longer a log than with Delta's
# own checkpoints, which the store leaves to busy periods (delta_store.CHECKPOINT_INTERVAL).
IDLE_CHECKPOINT_COMMITS = 10


class Bookkeeping:
    def __init__(
        self,
        name: str,
        instance_id: Callable[[], str],
        store: Store,
        status: MessageSender,
        metrics: SubscriberMetrics,
        purge_every_commits: int,
    ) -> None:
        self.name = name
        self.instance_id = instance_id
        self.store = store
        self.status = status
        self.metrics = metrics
        self.purge_every_commits = purge_every_commits
        self.statuses_sent = 0
        self.commits_since_purge = 0

    def send_pending_statuses(self) -> None:
        state = self.store.state
        if state is None:
            return
        sent_up_to = None
        for offset, agent, status in list(state.pending_statuses):
            try:
                self.status.send(
                    m.PackageStatusMessage(
                        sub_sling_id=self.instance_id(),
                        sub_agent_name=self.name,
                        pub_agent_name=agent,
                        offset=offset,
                        status=status,  # the enum value name
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
        """Housekeeping when a poll found nothing to import: purging sent statuses, and
        checkpointing the store. A failure is logged and tried again after more commits; it
        never stops the import thread."""
        state = self.store.state
        try:
            if (
                state is not None
                and self.commits_since_purge >= self.purge_every_commits
                and not state.pending_statuses
            ):
                self.commits_since_purge = 0
                self.store.forget_statuses(state.sent_statuses_up_to)
            if self.store.commits_since_checkpoint >= IDLE_CHECKPOINT_COMMITS:
                self.store.checkpoint()
        except Exception:
            log.warning(
                "%s: store housekeeping failed; trying again later", self.name, exc_info=True
            )
