"""Triage of one package record: import it, skip it (another agent's, or cleared), or fail it
for good (REMOVED_FAILED, committed with its batch, whatever max_retries says). A failure a
retry may mend is raised for the import loop to retry. A package to import passes the pre
import hooks (subscriber.hooks) here: their failures are classified the same way."""

from __future__ import annotations

import logging

from journal.api import Record
from journal.wire import messages as m
from runtime.errors import PermanentError
from runtime.ratelog import RateLimitedLog
from subscriber.bookkeeper.commands import Commands
from subscriber.bookkeeper.counters import AgentCounters
from subscriber.bookkeeper.decoding import Decoded, RecordDecoder
from subscriber.bookkeeper.failures import FailureReporter
from subscriber.bookkeeper.retries import Retries
from subscriber.bookkeeper.sequences import SequenceCheck
from subscriber.hooks import HookPackage, ImportHooks
from subscriber.metrics import SubscriberMetrics
from subscriber.settings import SubscriberSettings
from subscriber.store.changes import ChangeSet, Unit

log = logging.getLogger(__name__)


class Triage:
    def __init__(
        self,
        settings: SubscriberSettings,
        decoder: RecordDecoder,
        commands: Commands,
        retries: Retries,
        reporter: FailureReporter,
        metrics: SubscriberMetrics,
        counters: AgentCounters,
        hooks: ImportHooks,
        sequences: SequenceCheck,
    ) -> None:
        self.settings = settings
        self.decoder = decoder
        self.commands = commands
        self.retries = retries
        self.reporter = reporter
        self.metrics = metrics
        self.counters = counters
        self.hooks = hooks
        self.sequences = sequences
        # Records of unknown types: anyone with write access can flood the topic with them.
        self._skipped = RateLimitedLog(log)

    def unit(
        self, record: Record, decoded: Decoded | None = None, changes: ChangeSet | None = None
    ) -> Unit:
        """What to do with one record (decoded ahead of time or now) that goes into ``changes``
        (the batch in progress, whose sequence numbers count as applied); raises when the
        package cannot be imported now but a retry may mend that."""
        offset = record.offset
        if decoded is None:
            decoded = self.decoder.decode(record)
        message = decoded.package_message
        if decoded.unknown or (decoded.error is None and message is None):
            self.counters.unknown_records += 1
            self._skipped.log(
                logging.WARNING,
                "%s: skipped record at offset %d: %s",
                self.settings.agent_name,
                offset,
                decoded.error,
            )
            return Unit(offset, "", "", m.ReqType.TEST)
        if message is None:  # undecodable: it names no agent; reported to the first followed
            return self._failed_permanently(offset, self.settings.pub_agents[0], "", decoded.error)
        agent, created = message.pub_agent_name, message.created_ms
        if agent not in self.settings.pub_agents:
            return Unit(offset, agent, message.pkg_id, message.req_type)
        # A record that fails for good (a bad signature among others): its number is no evidence.
        number = 0 if decoded.permanent else message.sequence
        if not self.sequences.admit(agent, number, offset, changes.sequences if changes else {}):
            return Unit(offset, agent, message.pkg_id, m.ReqType.TEST)
        if self.commands.cleared(agent, offset, number):
            self.retries.cleared += 1
            status = m.Status.REMOVED if self.settings.editable else None
            return Unit(
                offset, agent, message.pkg_id, message.req_type, None, status, created, number
            )
        if decoded.permanent:  # maybe forged (unverified): its number is neither applied nor sent
            return self._failed_permanently(offset, agent, message.pkg_id, decoded.error)
        if decoded.error is not None:
            raise decoded.error
        assert decoded.package is not None, "a followed agent's package is read when decoded"
        name, pkg_id = self.settings.agent_name, message.pkg_id
        hooked = HookPackage(name, agent, pkg_id, offset, message.req_type, decoded.package)
        try:
            self.hooks.pre(hooked)
        except PermanentError as exc:  # a genuine record: its number counts as applied
            return self._failed_permanently(offset, agent, message.pkg_id, exc, number)
        status = m.Status.IMPORTED if self.settings.editable else None
        return Unit(
            offset,
            agent,
            message.pkg_id,
            message.req_type,
            decoded.package,
            status,
            created,
            number,
            decoded.unmodelled,
        )

    def _failed_permanently(
        self, offset: int, agent: str, pkg_id: str, error: Exception | None, number: int = 0
    ) -> Unit:
        """A package no retry can import: REMOVED_FAILED, committed with its batch, whatever
        max_retries says and whether or not the subscriber is editable."""
        assert error is not None
        self.counters.permanent_failures += 1
        self.metrics.import_failed(retriable=False)
        self.reporter.report(offset, agent, pkg_id, error, sequence=number)
        return Unit(offset, agent, pkg_id, m.ReqType.TEST, None, m.Status.REMOVED_FAILED, 0, number)
