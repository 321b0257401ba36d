"""The store's statuses besides imports: those committed with a batch are sent after it (and
again after a crash left them unsent). The store's maintenance, which the import loop drives
beside this, is subscriber.maintenance.scheduler's."""

from __future__ import annotations

import logging
from collections.abc import Callable

from journal.errors import JournalError
from journal.messaging import MessageSender
from journal.wire import messages as m
from subscriber.metrics import SubscriberMetrics
from subscriber.store.base import Store

log = logging.getLogger(__name__)


class Bookkeeping:
    def __init__(
        self,
        name: str,
        instance_id: Callable[[], str],
        store: Store,
        status: MessageSender,
        metrics: SubscriberMetrics,
    ) -> None:
        self.name = name
        self.instance_id = instance_id
        self.store = store
        self.status = status
        self.metrics = metrics
        self.statuses_sent = 0

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
