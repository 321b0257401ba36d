"""The subscriber agent: follows the package topic from its stored offset and imports each
package into its Delta content store exactly once.

One thread (``run``) does every store write, in offset order: it polls packages, folds them
into a ChangeSet (several per commit when behind), commits, then sends the statuses that
commit recorded. While a batch commits, a helper thread polls and decodes the next one
(fetching spilled packages from the blob store): the import thread then finds it ready, and
nothing of it is imported before the batch ahead of it is. A failing package is isolated and
retried with back-off; with max_retries >= 0 it is skipped after its last attempt with
REMOVED_FAILED. Side threads only read the agent's state: the discovery announcer, and the
command reader that records clear requests for the import thread to persist.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message

from blobstore.api import BlobStore
from journal.api import Consumer, Journal, Position, Record
from journal.errors import DecodeError, JournalError, UnknownMessageType
from journal.messaging import MessagePoller, MessageSender
from journal.wire import messages as m
from journal.wire.package import ContentPackage
from subscriber.changes import ChangeSet, InvalidPackage, Unit
from subscriber.fetch import read_package
from subscriber.http import Health
from subscriber.metrics import SubscriberMetrics
from subscriber.readiness import Readiness, ReadinessRules
from subscriber.retry import RetryPolicy
from subscriber.settings import SubscriberSettings
from subscriber.store import ContentStore

log = logging.getLogger(__name__)

# Package type written in PackageMessage.pkg_type by scd publishers.
PACKAGE_TYPE = "scd-content"
# Granularity of interruptible waits (retry back-off, idle): how fast a clear command or a
# stop request is noticed while the import thread sleeps.
WAIT_STEP_S = 0.05

# An idle agent checkpoints its store once this many commits were made since the last
# checkpoint: Delta's default interval, so readers replay no longer a log than with Delta's
# own checkpoints, which the store leaves to busy periods (store.CHECKPOINT_INTERVAL).
IDLE_CHECKPOINT_COMMITS = 10

InvalidateHook = Callable[[Sequence[str], m.PackageMessage], None]


@dataclass
class AgentCounters:
    imported: int = 0
    skipped: int = 0
    failed_attempts: int = 0
    removed_failed: int = 0
    cleared: int = 0
    commits: int = 0
    unknown_records: int = 0
    last_batch: int = 0
    statuses_sent: int = 0
    loop_restarts: int = 0  # import loop restarted from the stored offset after an error
    import_seconds: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class _Decoded:
    """A package record decoded, its package read, before the import looks at it; an error is
    kept for the import to raise where it would have raised it (a cleared package never does)."""

    message: Message | None = None
    error: Exception | None = None  # the record could not be decoded
    package: ContentPackage | None = None
    package_error: Exception | None = None  # the package could not be read


class _Failed(Exception):
    """An import attempt of the package at ``offset`` failed."""

    def __init__(self, offset: int, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.offset = offset
        self.cause = cause


class SubscriberAgent:
    def __init__(
        self,
        settings: SubscriberSettings,
        journal: Journal,
        spark: Any,
        blobs: BlobStore | None = None,
        *,
        invalidate: InvalidateHook | None = None,
    ) -> None:
        self.settings = settings
        self.journal = journal
        self.blobs = blobs
        self.invalidate = invalidate
        self.topics = settings.journal.topics
        self.store = ContentStore(spark, settings.store_path)
        self.policy = RetryPolicy(
            settings.retry_initial_s, settings.retry_max_s, settings.max_retries
        )
        self.counters = AgentCounters()
        self.metrics = SubscriberMetrics(settings.agent_name)
        self.readiness = Readiness(
            ReadinessRules(
                idle_s=settings.ready_idle_s,
                max_message_age_s=settings.ready_max_message_age_s,
                max_retries=settings.ready_max_retries,
                force_ready_s=settings.ready_force_s,
            )
        )
        self.retries = 0  # failed attempts of the package being retried (0 when none)
        self.processed_offset = -1  # in memory; the store may lag by unstored skips
        self.latest_seen_ms = 0
        self._status = MessageSender(journal, self.topics.status)
        self._discovery = MessageSender(journal, self.topics.discovery)
        self._requested_clear = -1
        self._stop = threading.Event()
        self._announce_now = threading.Event()
        self._batch = settings.batch_max
        self._unstored_skips = 0
        self._commits_since_purge = 0
        self._consumer: Consumer | None = None
        # The next batch, polled and decoded while the current one commits (one at a time).
        self._prefetcher = ThreadPoolExecutor(1, thread_name_prefix=f"{self.name}-prefetch")
        self._prefetched: Future[list[tuple[Record, _Decoded]]] | None = None
        self._threads: list[threading.Thread] = []
        self._commands: MessagePoller | None = None
        self.instance_id = ""
        self._lag = 0

    # ------------------------------------------------------------------ lifecycle
    def open(self) -> None:
        """Open the store, settle the start position, resend statuses a crash left unsent."""
        state = self.store.open()
        self.instance_id = state.instance_id
        package_topic = self.topics.package
        if state.offset is None:
            start = (
                self.journal.latest_offset(package_topic)
                if self.settings.reset == "latest"
                else self.journal.earliest_offset(package_topic)
            )
            self.store.record_offset(start - 1, f"new store, reset to {self.settings.reset}")
            log.info(
                "%s: new store starts at offset %d (%s)", self.name, start, self.settings.reset
            )
        offset = self.store.state.offset if self.store.state else None
        self.processed_offset = offset if offset is not None else -1
        self._consumer = self.journal.consumer(
            package_topic, Position.at(self.processed_offset + 1)
        )
        self._send_pending_statuses()

    @property
    def name(self) -> str:
        return self.settings.agent_name

    def start(self) -> SubscriberAgent:
        """Open (unless done) and run the import loop, announcer and command reader in
        background threads."""
        if self._consumer is None:
            self.open()
        self._spawn(self._announce_loop, "announce")
        if self.settings.editable:
            self._commands = MessagePoller(
                self.journal,
                self.topics.command,
                Position.earliest(),
                {m.CommandMessage: self._on_command},
                name=f"{self.name}-commands",
            ).start()
        self._spawn(self.run, "import")
        return self

    def _spawn(self, target: Callable[[], None], what: str) -> None:
        thread = threading.Thread(target=target, name=f"{self.name}-{what}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop after the current commit (an import in progress is finished or not started)."""
        self._stop.set()
        self._announce_now.set()
        if self._commands is not None:
            self._commands.stop()
        for thread in self._threads:
            thread.join(timeout_s)
        self._close_consumer()
        self._prefetcher.shutdown()

    def _close_consumer(self) -> None:
        """Close the consumer once no prefetch uses it; records prefetched are dropped (they
        are after the stored offset, so a reopened consumer reads them again)."""
        if self._prefetched is not None:
            self._prefetched.exception()  # waits for it; its outcome no longer matters
            self._prefetched = None
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    # ------------------------------------------------------------------ import loop
    def run(self) -> None:
        while not self._stop.is_set():
            try:
                if self._consumer is None:
                    self.open()
                self.run_once()
            except JournalError as exc:
                log.warning("%s: journal unavailable, retrying: %s", self.name, exc)
                self._stop.wait(self.settings.poll_timeout_s)
            except Exception:
                # Anything else (a bug, the store failing outside an import) would lose the
                # records polled but not imported if the loop just went on: start again from
                # the offset in the store, as a restarted process would.
                self.counters.loop_restarts += 1
                self.metrics.import_loop_restarts.inc()
                log.exception("%s: import loop failed; resuming from the stored offset", self.name)
                self._close_consumer()
                self._stop.wait(self.settings.retry_initial_s)

    def run_once(self) -> int:
        """Poll and import one batch; returns the number of records handled."""
        assert self._consumer is not None, "open() the agent first"
        self._persist_requested_clear()
        if self._prefetched is not None:
            future, self._prefetched = self._prefetched, None
            polled = future.result()
            if polled and len(polled) < self._batch:
                # The prefetch returned with the first records that came during the commit;
                # take the ones that came after them too, as a poll after the commit would.
                polled += self._poll_decoded(0.0, self._batch - len(polled))
        else:
            polled = self._poll_decoded()
        self.readiness.on_poll(len(polled))
        if not polled:
            self._idle()
            return 0
        self._import(polled)
        # After a batch was split to isolate a failing package, grow back to batch_max.
        self._batch = min(self._batch * 2, self.settings.batch_max)
        return len(polled)

    def _poll_decoded(
        self, timeout_s: float | None = None, max_records: int | None = None
    ) -> list[tuple[Record, _Decoded]]:
        """Poll the next batch and decode it (in the import thread, or as the prefetch)."""
        assert self._consumer is not None, "open() the agent first"
        records = self._consumer.poll(
            self.settings.poll_timeout_s if timeout_s is None else timeout_s,
            max_records=self._batch if max_records is None else max_records,
        )
        return [(record, self._decode(record)) for record in records]

    def _import(self, polled: list[tuple[Record, _Decoded]]) -> None:
        changes = ChangeSet(self.store.paths)
        for record, decoded in polled:
            if self._stop.is_set():
                break
            try:
                changes.add(self._unit(record, decoded))
            except Exception as exc:  # this package fails: import the ones before it first
                self._commit_or_retry(changes)
                self._retry(record, _Failed(record.offset, exc))
                changes = ChangeSet(self.store.paths)
        if not self._stop.is_set():
            self._prefetched = self._prefetcher.submit(self._poll_decoded)
        self._commit_or_retry(changes)

    def _commit_or_retry(self, changes: ChangeSet) -> None:
        try:
            self._commit(changes)
        except _Failed as failed:  # a one-package commit failed
            self._retry_unit(changes.units[0], failed)

    def _decode(self, record: Record) -> _Decoded:
        """Decode a record and read its package if it is one of the followed agents'."""
        try:
            message = m.decode(record.headers, record.value)
        except (UnknownMessageType, DecodeError) as exc:
            return _Decoded(error=exc)
        if (
            not isinstance(message, m.PackageMessage)
            or message.pub_agent_name not in self.settings.pub_agents
        ):
            return _Decoded(message)
        try:
            return _Decoded(message, package=read_package(message, self.blobs))
        except Exception as exc:
            return _Decoded(message, package_error=exc)

    def _unit(self, record: Record, decoded: _Decoded | None = None) -> Unit:
        """What to do with one record (decoded ahead of time or now); raises when the package
        cannot be imported now."""
        offset = record.offset
        if decoded is None:
            decoded = self._decode(record)
        message = decoded.message
        if isinstance(decoded.error, UnknownMessageType):
            self.counters.unknown_records += 1
            log.warning("%s: skipped record at offset %d: %s", self.name, offset, decoded.error)
            return Unit(offset, "", "", m.ReqType.TEST)
        if decoded.error is not None:
            raise InvalidPackage(
                f"undecodable package record at offset {offset}: {decoded.error}"
            ) from decoded.error
        if not isinstance(message, m.PackageMessage):
            self.counters.unknown_records += 1
            return Unit(offset, "", "", m.ReqType.TEST)
        agent = message.pub_agent_name
        created = message.created_ms
        if agent not in self.settings.pub_agents:
            return Unit(offset, agent, message.pkg_id, message.req_type)
        if offset <= self._clear_offset():
            self.counters.cleared += 1
            status = m.Status.REMOVED if self.settings.editable else None
            return Unit(offset, agent, message.pkg_id, message.req_type, None, status, created)
        if decoded.package_error is not None:
            raise decoded.package_error
        assert decoded.package is not None, "a followed agent's package is read when decoded"
        package = decoded.package
        if message.req_type == m.ReqType.INVALIDATE and self.invalidate is not None:
            self.invalidate([*message.paths], message)
        status = m.Status.IMPORTED if self.settings.editable else None
        return Unit(offset, agent, message.pkg_id, message.req_type, package, status, created)

    def _commit(self, changes: ChangeSet) -> None:
        """Commit a batch (isolating a failing package if the commit itself fails)."""
        if not changes.units:
            return
        content = any(u.package is not None or u.status is not None for u in changes.units)
        self._unstored_skips += sum(
            1 for u in changes.units if u.package is None and u.status is None
        )
        if not content and self._unstored_skips < self.settings.skip_store_every:
            self._advance(changes)  # not-for-us packages only: store every Nth skip
            return
        started = time.monotonic()
        try:
            self.store.commit(changes)
        except Exception as exc:
            if len(changes.units) == 1:
                raise _Failed(changes.units[0].offset, exc) from exc
            log.warning(
                "%s: batch %s failed (%s); importing its packages one by one",
                self.name,
                changes.summary()["offsets"],
                exc,
            )
            self._batch = 1
            for unit in changes.units:
                single = ChangeSet(self.store.paths)
                single.add(unit)
                try:
                    self._commit(single)
                except _Failed as failed:
                    self._retry_unit(unit, failed)
            return
        elapsed = time.monotonic() - started
        now_ms = int(time.time() * 1000)
        for unit in changes.units:
            if unit.package is not None:
                self.metrics.package_imported(unit.package.ByteSize(), unit.created_ms, now_ms)
                self.readiness.on_imported(unit.created_ms)
        self.metrics.batch_imported(len(changes.units), elapsed)
        self.counters.import_seconds.append(elapsed)
        self.counters.commits += 1
        self.counters.last_batch = len(changes.units)
        self.counters.imported += sum(1 for u in changes.units if u.package is not None)
        self._unstored_skips = 0
        self._advance(changes)
        log.info(
            "%s: committed offsets %d..%d (%d packages, %d upserts, %d deletes) in %.2f s",
            self.name,
            changes.first_offset,
            changes.last_offset,
            len(changes.units),
            len(changes.upserts),
            len(changes.deletes),
            elapsed,
            extra={
                "agent": self.name,
                "offset": changes.last_offset,
                "first_offset": changes.first_offset,
                "packages": len(changes.units),
            },
        )
        self._send_pending_statuses()
        self._commits_since_purge += 1

    def _advance(self, changes: ChangeSet) -> None:
        self.processed_offset = changes.last_offset
        created = [u.created_ms for u in changes.units if u.created_ms]
        if created:
            self.latest_seen_ms = max(created)

    # ------------------------------------------------------------------ failures
    def _retry(self, record: Record, failed: _Failed) -> None:
        """Retry the package at ``record`` until it imports, is given up, or is cleared."""

        def attempt() -> None:
            changes = ChangeSet(self.store.paths)
            changes.add(self._unit(record))
            self._commit(changes)

        self._retry_loop(
            record.offset, _pub_agent(record, self.settings.pub_agents[0]), failed, attempt
        )

    def _retry_unit(self, unit: Unit, failed: _Failed) -> None:
        def attempt() -> None:
            changes = ChangeSet(self.store.paths)
            changes.add(unit)
            self._commit(changes)

        self._retry_loop(unit.offset, unit.pub_agent, failed, attempt)

    def _retry_loop(
        self, offset: int, agent: str, failed: _Failed, attempt: Callable[[], None]
    ) -> None:
        attempts = 0
        cause: BaseException = failed.cause
        while True:
            attempts += 1
            self.retries = attempts
            self.counters.failed_attempts += 1
            self.metrics.import_failed(retriable=bool(getattr(cause, "retriable", False)))
            self.metrics.current_retries.set(attempts)
            self.readiness.on_retries(attempts)
            self._report_failure(offset, agent, cause, attempts)
            if self.policy.gives_up(attempts):
                log.error(
                    "%s: giving up on offset %d after %d attempts", self.name, offset, attempts
                )
                self._skip(offset, agent, m.Status.REMOVED_FAILED)
                self.counters.removed_failed += 1
                break
            if not self._wait_or_cleared(offset, self.policy.delay(attempts)):
                if self._stop.is_set():
                    break  # not committed: retried after restart
                self._skip(offset, agent, m.Status.REMOVED if self.settings.editable else None)
                self.counters.cleared += 1
                break
            try:
                attempt()
                break
            except _Failed as exc:
                cause = exc.cause
            except Exception as exc:
                cause = exc
        self.retries = 0
        self.metrics.current_retries.set(0)
        self.readiness.on_retries(0)
        self._announce_now.set()

    def _skip(self, offset: int, agent: str, status: int | None) -> None:
        changes = ChangeSet(self.store.paths)
        changes.add(Unit(offset, agent, "", m.ReqType.TEST, None, status))
        self._unstored_skips = self.settings.skip_store_every  # always store this one
        self._commit(changes)

    def _wait_or_cleared(self, offset: int, delay_s: float) -> bool:
        """Sleep ``delay_s``; False early when stopping or when a clear covers ``offset``."""
        deadline = time.monotonic() + delay_s
        while time.monotonic() < deadline:
            if self._stop.is_set():
                return False
            self._persist_requested_clear()
            if offset <= self._clear_offset():
                log.info("%s: offset %d cleared while being retried", self.name, offset)
                return False
            self._stop.wait(min(WAIT_STEP_S, max(deadline - time.monotonic(), 0)))
        return True

    def _report_failure(self, offset: int, agent: str, cause: BaseException, attempts: int) -> None:
        log.warning(
            "%s: import of offset %d failed (attempt %d): %s",
            self.name,
            offset,
            attempts,
            cause,
            extra={"agent": self.name, "offset": offset, "attempt": attempts},
        )
        try:
            self._status.send(
                m.LogMessage(
                    pub_agent_name=self.settings.pub_agents[0],
                    sub_sling_id=self.instance_id,
                    sub_agent_name=self.name,
                    message=f"attempt {attempts}: {cause}",
                    stacktrace="".join(traceback.format_exception(cause))[-4000:],
                    offset=offset,
                )
            )
        except JournalError as exc:
            log.warning("%s: could not send LogMessage: %s", self.name, exc)
        self._announce_now.set()

    # ------------------------------------------------------------------ statuses, commands
    def _send_pending_statuses(self) -> None:
        state = self.store.state
        if state is None:
            return
        sent_up_to = None
        for offset, agent, status in list(state.pending_statuses):
            try:
                self._status.send(
                    m.PackageStatusMessage(
                        sub_sling_id=self.instance_id,
                        sub_agent_name=self.name,
                        pub_agent_name=agent,
                        offset=offset,
                        status=status,  # the enum value name
                    )
                )
            except JournalError as exc:
                log.warning("%s: status of offset %d not sent yet: %s", self.name, offset, exc)
                break
            self.counters.statuses_sent += 1
            self.metrics.status_sent(status)
            sent_up_to = offset
        if sent_up_to is not None:
            state.pending_statuses = [s for s in state.pending_statuses if s[0] > sent_up_to]
            state.sent_statuses_up_to = sent_up_to

    def _on_command(self, command: m.CommandMessage, record: Record) -> None:
        if command.sub_agent_name != self.name or command.sub_sling_id != self.instance_id:
            return  # another subscriber's command
        if command.HasField("clear_command"):
            offset = command.clear_command.offset
            if offset > self._requested_clear:
                self._requested_clear = offset
                log.info("%s: clear up to offset %d requested", self.name, offset)

    def _clear_offset(self) -> int:
        return self.store.state.clear_offset if self.store.state else -1

    def _persist_requested_clear(self) -> None:
        if self._requested_clear > self._clear_offset():
            self.store.record_clear(self._requested_clear)

    def _idle(self) -> None:
        """Store housekeeping, done when a poll found nothing to import: purging sent
        statuses, and checkpointing the Delta log (see store.CHECKPOINT_INTERVAL). A failure
        is logged and tried again after more commits; it never stops the import thread."""
        state = self.store.state
        try:
            if (
                state is not None
                and self._commits_since_purge >= self.settings.purge_every_commits
                and not state.pending_statuses
            ):
                self._commits_since_purge = 0
                self.store.forget_statuses(state.sent_statuses_up_to)
            if self.store.commits_since_checkpoint >= IDLE_CHECKPOINT_COMMITS:
                self.store.checkpoint()
        except Exception:
            log.warning(
                "%s: store housekeeping failed; trying again later", self.name, exc_info=True
            )

    # ------------------------------------------------------------------ health
    @property
    def state(self) -> str:
        if self._stop.is_set():
            return "STOPPING"
        if not self.instance_id:
            return "STARTING"
        if self.retries:
            return "BLOCKED" if self.settings.max_retries < 0 else "RETRYING"
        return "RUNNING" if self.lag else "IDLE"

    @property
    def lag(self) -> int:
        """Packages on the log after the processed offset (as of the last announcement)."""
        return self._lag

    def health(self) -> Health:
        return Health(
            agent=self.name,
            instance_id=self.instance_id or None,
            processed_offset=self.processed_offset if self.processed_offset >= 0 else None,
            state=self.state,
        )

    def _refresh_lag(self) -> None:
        try:
            latest = self.journal.latest_offset(self.topics.package)
        except JournalError:
            return
        self._lag = max(0, latest - self.processed_offset - 1)
        self.metrics.offsets(self.processed_offset, latest)
        ready, reason = self.readiness.check()
        if ready and self.readiness.ready_after_s is not None:
            self.metrics.ready(reason, self.readiness.ready_after_s)

    # ------------------------------------------------------------------ discovery
    def discovery_message(self) -> m.DiscoveryMessage:
        return m.DiscoveryMessage(
            sub_sling_id=self.instance_id,
            sub_agent_name=self.name,
            subscriber_state=[
                m.SubscriberState(
                    pub_agent_name=agent, offset=self.processed_offset, retries=self.retries
                )
                for agent in self.settings.pub_agents
            ],
            subscriber_configuration=m.SubscriberConfiguration(
                editable=self.settings.editable, max_retries=self.settings.max_retries
            ),
        )

    def announce(self) -> None:
        try:
            self._discovery.send(self.discovery_message(), key=self.name)
        except JournalError as exc:
            log.warning("%s: discovery announcement failed: %s", self.name, exc)

    def _announce_loop(self) -> None:
        while not self._stop.is_set():
            self.announce()
            self._refresh_lag()
            self._announce_now.wait(self.settings.announce_interval_s)
            self._announce_now.clear()


def _pub_agent(record: Record, default: str) -> str:
    """The publisher agent of a package record, when its bytes still decode that far."""
    try:
        message = m.decode(record.headers, record.value)
    except DecodeError:
        return default
    return message.pub_agent_name if isinstance(message, m.PackageMessage) else default
