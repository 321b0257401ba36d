"""Discovery: the subscriber announces itself and its progress to the publishers it follows
(Sling: every 10 s; the publisher drops a subscriber silent for 30 s), and refreshes its lag
from the log's latest offset on the same beat.

Progress is the processed offset of the log it reads and, per publisher agent, the last package
sequence number applied (0: none numbered yet): a publisher reading this announcement from
another region's copy places the subscriber on its own log by the number (docs/regions.md)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence

from journal.api import Journal
from journal.errors import JournalError
from journal.messaging import MessageSender
from journal.wire import messages as m
from subscriber.metrics import SubscriberMetrics
from subscriber.readiness import Readiness
from subscriber.settings import SubscriberSettings

log = logging.getLogger(__name__)


class Announcer:
    def __init__(
        self,
        settings: SubscriberSettings,
        journal: Journal,
        instance_id: Callable[[], str],
        progress: Callable[[], tuple[int, int]],  # (processed offset, retries)
        unread: Callable[[int], int],  # packages after the processed offset, given the log's end
        paused: Callable[[], bool],
        sequences: Callable[[], Mapping[str, int]],  # the last number applied per agent
        metrics: SubscriberMetrics,
        readiness: Readiness,
        stop: threading.Event,
    ) -> None:
        self.settings = settings
        self.name = settings.agent_name
        self.journal = journal
        self.instance_id = instance_id
        self.progress = progress
        self.unread = unread
        self.paused = paused
        self.sequences = sequences
        self.metrics = metrics
        self.readiness = readiness
        self.stop = stop
        self.now = threading.Event()  # set: announce without waiting for the interval
        self.lag = 0  # packages on the log after the processed offset, as of the last refresh
        self._sender = MessageSender(journal, settings.journal.topics.discovery)
        # A staged subscriber's wait: (canaries pending, canaries failed) of the package it
        # waits with (subscriber.bookkeeper.staging); nothing when it waits for none.
        self.canaries: Callable[[], tuple[Sequence[str], Sequence[str]]] = lambda: ((), ())

    def message(self) -> m.DiscoveryMessage:
        offset, retries = self.progress()
        sequences = self.sequences()
        pending, failed = self.canaries()
        return m.DiscoveryMessage(
            sub_sling_id=self.instance_id(),
            sub_agent_name=self.name,
            subscriber_state=[
                m.SubscriberState(
                    pub_agent_name=agent,
                    offset=offset,
                    retries=retries,
                    sequence=sequences.get(agent, 0),
                )
                for agent in self.settings.pub_agents
            ],
            subscriber_configuration=m.SubscriberConfiguration(
                editable=self.settings.editable, max_retries=self.settings.max_retries
            ),
            paused=self.paused(),
            canary_pending=pending,
            canary_failed=failed,
        )

    def announce(self) -> None:
        if not self.instance_id():
            return  # no store open (a standby): the process writing the store announces
        try:
            self._sender.send(self.message(), key=self.name)
        except JournalError as exc:
            log.warning("%s: discovery announcement failed: %s", self.name, exc)

    def refresh_lag(self) -> None:
        try:
            latest = self.journal.latest_offset(self.settings.journal.topics.package)
        except JournalError:
            return
        processed, _ = self.progress()
        self.lag = self.unread(latest)
        self.metrics.offsets(processed, self.lag)
        ready, reason = self.readiness.check()
        if ready and self.readiness.ready_after_s is not None:
            self.metrics.ready(reason, self.readiness.ready_after_s)

    def run(self) -> None:
        while not self.stop.is_set():
            self.announce()
            self.refresh_lag()
            self.now.wait(self.settings.announce_interval_s)
            self.now.clear()
