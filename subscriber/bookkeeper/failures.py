"""Telling the publisher, and the log, that a package failed, or that it was imported without
content scd does not model (a FileVault package's access control, node types, ...).

Every failure is a log line and a LogMessage on the status topic under the publisher agent of
the failing package, which the publisher shows in that subscriber's error queue. A permanent
failure's message starts with ``permanent:``; a transient one names its attempt. Each is also
a failure event on the event topic (journal/failure_events.py), with the attempt, the retries
left and whether the package is now skipped.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable

from journal import failure_events
from journal.api import Journal
from journal.content.filevault import Unmodelled
from journal.errors import JournalError
from journal.messaging import MessageSender
from journal.wire import messages as m
from runtime.errors import PermanentError
from runtime.ratelog import RateLimitedLog

log = logging.getLogger(__name__)

# Longest stack trace sent with a LogMessage (the subscriber's own log has it whole).
MAX_STACKTRACE_CHARS = 4000
# Longest error text sent: errors may quote hostile input, which must not grow the topic.
MAX_MESSAGE_CHARS = 2000


class FailureReporter:
    def __init__(
        self,
        name: str,
        instance_id: Callable[[], str],
        status: MessageSender,
        on_report: Callable[[], None],
        *,
        events: Journal,
        event_topic: str,
        max_retries: int,
    ) -> None:
        self.name = name
        self.instance_id = instance_id
        self.status = status
        self.on_report = on_report  # e.g. announce the new retry count at once
        self._permanent = RateLimitedLog(log)
        self.events = events
        self.event_topic = event_topic
        self.max_retries = max_retries

    def report(
        self,
        offset: int,
        pub_agent: str,
        pkg_id: str,
        cause: BaseException,
        *,
        attempt: int | None = None,
        committed: bool = False,
        sequence: int = 0,
    ) -> None:
        """``attempt`` None: a permanent failure, never retried; ``committed``: a failure after
        the package's commit (a post import hook), neither retried nor discarded: the package
        stays imported. ``sequence``: the package's number (0: unknown), which places the
        failure at a publisher reading it from another region's copy (docs/regions.md)."""
        what = "permanent" if attempt is None else f"attempt {attempt}"
        if committed:
            what = "after commit"
        # Permanent failures can come by the thousand (garbage on the topic): rate-limited.
        logger = self._permanent.log if attempt is None else log.log
        logger(
            logging.WARNING,
            "%s: import of offset %d (%s) failed (%s): %s",
            self.name,
            offset,
            pub_agent,
            what,
            cause,
        )
        text = f"{what}: {cause}"
        try:
            self.status.send(
                m.LogMessage(
                    pub_agent_name=pub_agent,
                    sub_sling_id=self.instance_id(),
                    sub_agent_name=self.name,
                    message=text[:MAX_MESSAGE_CHARS],
                    stacktrace="".join(traceback.format_exception(cause))[-MAX_STACKTRACE_CHARS:],
                    offset=offset,
                    pkg_id=pkg_id,
                    sequence=sequence,
                )
            )
        except JournalError as exc:
            log.warning("%s: could not send LogMessage: %s", self.name, exc)
        self._send_event(offset, pub_agent, pkg_id, cause, attempt, committed)
        self.on_report()

    def unmodelled(self, offset: int, pub_agent: str, pkg_id: str, report: Unmodelled) -> None:
        """A package imported without what scd does not model: a log line and a LogMessage,
        as a failure is told, but no failure event (the import did not fail)."""
        text = f"imported without content scd does not model: {report.summary()}"
        log.warning("%s: offset %d (%s, %s) %s", self.name, offset, pub_agent, pkg_id, text)
        try:
            self.status.send(
                m.LogMessage(
                    pub_agent_name=pub_agent,
                    sub_sling_id=self.instance_id(),
                    sub_agent_name=self.name,
                    message=text[:MAX_MESSAGE_CHARS],
                    offset=offset,
                    pkg_id=pkg_id,
                )
            )
        except JournalError as exc:
            log.warning("%s: could not send LogMessage: %s", self.name, exc)

    def _send_event(
        self,
        offset: int,
        pub_agent: str,
        pkg_id: str,
        cause: BaseException,
        attempt: int | None,
        committed: bool,
    ) -> None:
        # Same rule as the retries' (RetryPolicy.gives_up): after max_retries + 1 attempts the
        # package is skipped; a permanent failure is skipped at once; a committed one never.
        discard = not committed and (attempt is None or 0 <= self.max_retries < attempt)
        permanent = isinstance(cause, PermanentError) if committed else attempt is None
        event = failure_events.FailureEvent(
            pub_agent_name=pub_agent,
            sub_agent_name=self.name,
            sub_sling_id=self.instance_id(),
            package_id=pkg_id,
            offset=offset,
            attempt=attempt or 1,
            max_retries=self.max_retries,
            will_discard=discard,
            permanent=permanent,
            exception=type(cause).__name__,
            message=str(cause),
        )
        try:
            self.events.send(
                self.event_topic,
                event.to_json(),
                key=self.name.encode(),
                headers=failure_events.headers(),
            )
        except JournalError as exc:
            log.warning("%s: could not send failure event: %s", self.name, exc)
