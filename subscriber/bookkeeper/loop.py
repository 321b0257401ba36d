"""The import loop: follows the package topic from the store's offset and imports each package
into the store exactly once.

One thread does every store write, in offset order: it polls packages, merges them into the
store's unit of work (several per commit when behind), commits, then sends the statuses that
commit recorded. While a batch commits, a helper thread polls and decodes the next one
(fetching spilled packages from the blob store): the import thread then finds it ready, and
nothing of it is imported before the batch ahead of it is.

Memory is bounded by bytes, not only by packages: a batch ends once its decoded packages reach
``batch_max_bytes`` (a larger package goes alone), and the batch read ahead has the same
budget. Records are polled in small chunks; what a chunk holds beyond the budget waits, raw,
for the next batch.

A package that can never be imported (subscriber.bookkeeper.decoding) is committed as REMOVED_FAILED
in its batch; one that failed for a reason a retry may mend is isolated and retried
(subscriber.bookkeeper.retries). Offsets the package topic deleted before they were read stop the
import (subscriber.bookkeeper.behind_log).

A staged subscriber (subscriber.bookkeeper.staging) commits the packages before one its
canaries did not report yet, then waits for them before importing it.

Import hooks (subscriber.hooks) run in this thread: a package's pre hooks when it is triaged
(a failure fails the attempt, like any import failure), its post hooks once the commit holding
it is done (a failure is reported; the package stays committed, never imported again).

A paused subscriber (subscriber.bookkeeper.commands) finishes the batch it is committing, then
holds: it drops what it read ahead and reads nothing until resumed, when it reads on from the
record after the last one it processed.

It writes only while this process holds the store's writer role (subscriber.writer.role): on
standby it waits; once active it claims the store with its writer epoch and opens it; when the
store refuses a write (``WriterDeposed``: another process took over) it steps down, drops what
it read and polled, and waits again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager

from journal.api import Consumer, Journal, Position, Record
from journal.errors import JournalError
from journal.wire import messages as m
from runtime.clock import now_ms
from subscriber.bookkeeper.behind_log import LogGaps
from subscriber.bookkeeper.commands import Commands
from subscriber.bookkeeper.counters import AgentCounters
from subscriber.bookkeeper.decoding import Decoded, RecordDecoder
from subscriber.bookkeeper.failures import FailureReporter
from subscriber.bookkeeper.resume import resume_offset
from subscriber.bookkeeper.retries import Retries, RetryPolicy
from subscriber.bookkeeper.sequences import SequenceCheck
from subscriber.bookkeeper.staging import StagedImport
from subscriber.bookkeeper.statuses import Bookkeeping
from subscriber.bookkeeper.triage import Triage
from subscriber.errors import AttemptFailed, Stopped, WriterDeposed
from subscriber.fleet.commit_slots import CommitSlots
from subscriber.hooks import HookPackage, ImportHooks, ImportResult
from subscriber.maintenance.scheduler import Maintenance
from subscriber.metrics import SubscriberMetrics
from subscriber.readiness import Readiness
from subscriber.settings import SubscriberSettings
from subscriber.start_report import StartReport
from subscriber.store.base import Store
from subscriber.store.changes import ChangeSet, Unit
from subscriber.writer.role import WriterRole

log = logging.getLogger(__name__)

# Records taken from the consumer at a time: what waits raw beyond a batch's byte budget is at
# most this many records (each at most the topic's maximum message size).
POLL_CHUNK = 64

Polled = list[tuple[Record, Decoded]]


class ImportLoop:
    def __init__(
        self,
        settings: SubscriberSettings,
        journal: Journal,
        store: Store,
        decoder: RecordDecoder,
        commands: Commands,
        bookkeeping: Bookkeeping,
        maintenance: Maintenance,
        reporter: FailureReporter,
        metrics: SubscriberMetrics,
        readiness: Readiness,
        gaps: LogGaps,
        role: WriterRole,
        stop: threading.Event,
        hooks: ImportHooks | None = None,
        staging: StagedImport | None = None,
        slots: CommitSlots | None = None,
        start: StartReport | None = None,
    ) -> None:
        self.settings = settings
        self.start = start if start is not None else StartReport()
        self.name = settings.agent_name
        self.journal = journal
        self.store = store
        self.decoder = decoder
        self.commands = commands
        self.bookkeeping = bookkeeping
        self.maintenance = maintenance
        self.reporter = reporter
        self.metrics = metrics
        self.readiness = readiness
        self.gaps = gaps
        self.role = role
        self.stop = stop
        self.staging = staging  # None: not staged after canaries
        # Shared by the daemon's agents: how many open or commit at once (None: this one's).
        self.slots = slots if slots is not None else CommitSlots(1)
        metrics.watch_commit_slots(self.slots)
        self.topic = settings.journal.topics.package
        self.counters = AgentCounters()
        self.hooks = hooks if hooks is not None else ImportHooks({}, metrics)
        self.retries = Retries(
            RetryPolicy(settings.retry_initial_s, settings.retry_max_s, settings.max_retries),
            editable=settings.editable,
            commands=commands,
            reporter=reporter,
            metrics=metrics,
            readiness=readiness,
            stop=stop,
            skip=self._skip,
        )
        self.sequences = SequenceCheck(self.name, store, metrics)
        self.triage = Triage(
            settings,
            decoder,
            commands,
            self.retries,
            reporter,
            metrics,
            self.counters,
            self.hooks,
            self.sequences,
        )
        self.processed_offset = -1  # in memory; the store may lag by unstored skips
        self._epoch: int | None = None  # the writer epoch the store was claimed with
        self.latest_seen_ms = 0
        self._batch = settings.batch_max
        self._unstored_skips = 0
        self._consumer: Consumer | None = None
        self._raw: deque[Record] = deque()  # polled, beyond the last batch's byte budget
        # (the last record read, the consumer's position) when a poll found the log drained:
        # the position is past the transaction markers after that record (``unread``).
        self._drained: tuple[int, int] | None = None
        self._last_read = -1
        # The next batch, polled and decoded while the current one commits (one at a time).
        self._prefetcher = ThreadPoolExecutor(1, thread_name_prefix=f"{self.name}-prefetch")
        self._prefetched: Future[Polled] | None = None
        self._holding = False  # paused: no consumer open, and none until resumed
        self._starting: bool | None = None  # what the store was last told (in_import_thread)

    # ------------------------------------------------------------------ lifecycle
    @property
    def opened(self) -> bool:
        # Behind the log the store is open but no consumer reads: run_once checks again.
        return self._consumer is not None or self.gaps.behind is not None or self._holding

    def open(self) -> None:
        """Claim the store with this process's writer epoch (when it has a lease), open it,
        settle the start position, resend statuses a crash left unsent."""
        self.close()
        self._holding = False
        epoch = self.role.epoch
        with self._slot():
            if epoch is not None:
                epoch = self._claim(epoch)
                self.start.mark("lease")
            self._epoch = epoch
            if self.readiness.starting:  # the goal of the caught-up rule, before the slow open
                self.readiness.expect_end(self.journal.latest_offset(self.topic))
            state = self.store.open()
            self.start.mark("store_open")
        offset = state.offset
        self.processed_offset = offset if offset is not None else -1
        self.bookkeeping.send_pending_statuses()
        # The stored offset may be another log's (a mirror, a moved clone): placed by sequence.
        self._position(resume_offset(self.journal, self.topic, offset, state.sequences))

    def _claim(self, epoch: int) -> int:
        """Claim the store with the lease's epoch; the epoch claimed. A store holding claims of
        that epoch or a later one that its lease never handed out (a clone, seeded from another
        store's table without its lease) is claimed with the epoch above them once the lease
        carries it: a compare-and-swap, which a deposed holder fails (``WriterDeposed``)."""
        try:
            self.store.claim(epoch, self.role.owner)
            return epoch
        except WriterDeposed:
            above = self.store.writer_epoch() + 1
            if above <= epoch or not self.role.raise_epoch(epoch, above):
                raise
        self.store.claim(above, self.role.owner)
        return above

    def _position(self, next_offset: int | None) -> None:
        """Open the consumer at the next offset (None: a new store's), unless the package
        topic lost it."""
        start = self.gaps.start(next_offset)
        if start is not None:  # else BEHIND_LOG: run_once checks again
            self.processed_offset = start - 1
            self._consumer = self.journal.consumer(self.topic, Position.at(start))
            if not self.commands.paused:
                self.readiness.on_position(start)

    def close(self) -> None:
        """Close the consumer once no prefetch uses it; records prefetched are dropped (they
        are after the stored offset, so a reopened consumer reads them again)."""
        if self._prefetched is not None:
            self._prefetched.exception()  # waits for it; its outcome no longer matters
            self._prefetched = None
        self._raw.clear()
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def stand_by(self) -> None:
        """Stop writing: close the consumer and forget the store's state (another process
        writes it now; it is read again when this one is active again)."""
        if self._epoch is None and not self.opened and self.store.state is None:
            return
        self.close()
        self.gaps.behind = None
        self._holding = False
        self.store.state = None
        self._epoch = None
        self.processed_offset = -1

    def shutdown(self) -> None:
        self.close()
        self._prefetcher.shutdown()

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        while not self.stop.is_set():
            self.step()

    def step(self) -> None:
        """One pass of the loop: wait on standby, or claim and open the store when it became
        active, and import one batch (tests drive it by hand)."""
        try:
            self._schedule()
            if not self.role.active:
                self.stand_by()
                self.stop.wait(self.settings.poll_timeout_s)
                return
            if not self.opened or self._epoch != self.role.epoch:
                self.open()
            self.run_once()
        except WriterDeposed as exc:
            self.role.step_down(str(exc))
            self.stand_by()
        except Stopped:
            pass  # records polled but not committed are read again when the agent runs again
        except JournalError as exc:
            log.warning("%s: journal unavailable, retrying: %s", self.name, exc)
            self.close()  # records polled but not imported are read again
            self.stop.wait(self.settings.poll_timeout_s)
        except Exception:
            # Anything else (a bug, the store failing outside an import) would lose the
            # records polled but not imported if the loop just went on: start again from
            # the offset in the store, as a restarted process would.
            self.counters.loop_restarts += 1
            self.metrics.import_loop_restarts.inc()
            log.exception("%s: import loop failed; resuming from the stored offset", self.name)
            self.close()
            self.stop.wait(self.settings.retry_initial_s)

    def _slot(self) -> AbstractContextManager[None]:
        """A commit slot (subscriber.fleet.commit_slots), ahead of the agents already serving
        until this one is ready."""
        return self.slots.hold(starting=self.readiness.starting, stop=self.stop)

    def _schedule(self) -> None:
        """Until the agent is ready, the store's work in this thread comes before that of the
        agents already serving (Store.in_import_thread)."""
        starting = self.readiness.starting
        if starting != self._starting:
            self.store.in_import_thread(starting)
            self._starting = starting

    def run_once(self) -> int:
        """Poll and import one batch; returns the number of records handled."""
        assert self.opened, "open() the agent first"
        self.commands.persist()
        if self._hold():
            return 0
        if self._consumer is None:  # behind the log
            if self.gaps.recheck_due():
                self._position(self.processed_offset + 1)
            if self._consumer is None:
                self.stop.wait(self.settings.poll_timeout_s)
                return 0
        if self._prefetched is not None:
            future, self._prefetched = self._prefetched, None
            polled = future.result()
            held = sum(d.size for _, d in polled)
            if polled and len(polled) < self._batch and held < self.settings.batch_max_bytes:
                # The prefetch returned with the first records that came during the commit;
                # take the ones that came after them too, as a poll after the commit would.
                polled += self.poll(0.0, self._batch - len(polled), held)
        else:
            polled = self.poll()
        gap = self.gaps.pending
        if not polled and gap is not None:  # what came before the gap is imported
            if self.gaps.found(gap):
                self.processed_offset = gap.last  # skipped: read on from the record past it
            else:
                self.close()  # BEHIND_LOG: nothing past the gap is imported
            return 0
        self.readiness.on_poll(len(polled))
        if not polled:
            self._drained_to_end()
            self.maintenance.idle()
            return 0
        self._import(polled)
        # After a batch was split to isolate a failing package, grow back to batch_max.
        self._batch = min(self._batch * 2, self.settings.batch_max)
        return len(polled)

    def _drained_to_end(self) -> None:
        """An empty poll: once everything read is processed, the consumer's position (past
        the transaction markers after the last record) is where the log is read to."""
        drained = self._drained
        if drained is not None and self.processed_offset >= drained[0]:
            self.readiness.on_position(drained[1])

    def _hold(self) -> bool:
        """True while paused (after waiting a poll's time); reads on after a resume."""
        if self.commands.paused:
            if not self._holding:
                self.close()  # what was read ahead is read again after the resume
                self._holding = True
            self.readiness.on_paused()
            self.stop.wait(self.settings.poll_timeout_s)
            return True
        if self._holding:  # resumed
            self._holding = False
            self._position(self.processed_offset + 1)
        return False

    def unread(self, latest: int) -> int:
        """Offsets on the log after the processed one (``latest``: the offset the next record
        gets), transaction markers (publisher replicas' fenced writers) not counted once the
        log was read to its end and everything read was processed."""
        drained = self._drained
        if drained is not None and self.processed_offset >= drained[0]:
            return max(0, latest - max(drained[1], self.processed_offset + 1))
        return max(0, latest - self.processed_offset - 1)

    def poll(
        self, timeout_s: float | None = None, max_records: int | None = None, held: int = 0
    ) -> Polled:
        """The next batch, decoded: up to ``max_records`` records, ending once the decoded
        bytes (``held`` already) reach the batch budget (in the import thread, or as the
        prefetch)."""
        assert self._consumer is not None, "open() the agent first"
        limit = self._batch if max_records is None else max_records
        wait = self.settings.poll_timeout_s if timeout_s is None else timeout_s
        polled: Polled = []
        while len(polled) < limit and held < self.settings.batch_max_bytes:
            if not self._raw:
                chunk = min(limit - len(polled), POLL_CHUNK)
                fetched = self._consumer.poll(0.0 if polled else wait, max_records=chunk)
                self.gaps.fetched([r.offset for r in fetched])
                self._raw.extend(fetched)
                if not self._raw:
                    position = self._consumer.positions().get(0)
                    if position is not None:
                        self._drained = (self._last_read, position)
                    break
                self._last_read = self._raw[-1].offset
            if not self.gaps.follows(self._raw[0].offset):
                break  # deleted offsets before it: this batch ends here
            record = self._raw.popleft()
            decoded = self.decoder.decode(record)
            polled.append((record, decoded))
            held += decoded.size
        return polled

    def _import(self, polled: Polled) -> None:
        changes = self.store.begin()
        for record, decoded in polled:
            if self.stop.is_set():
                break
            changes = self._await_canaries(record, decoded, changes)
            if self.stop.is_set():
                break
            try:
                changes.add(self.triage.unit(record, decoded, changes))
            except Exception as exc:  # this package fails: import the ones before it first
                self._commit_or_retry(changes)
                self._retry(record, exc)
                changes = self.store.begin()
        if not self.stop.is_set():
            self._prefetched = self._prefetcher.submit(self.poll)
        self._commit_or_retry(changes)

    def _await_canaries(self, record: Record, decoded: Decoded, changes: ChangeSet) -> ChangeSet:
        """``changes`` when the package at ``record`` may be imported now; else, once the
        packages before it are committed and the canaries went past it (or it was cleared,
        or released), a new unit of work."""
        message = decoded.package_message
        if self.staging is None or message is None or not self.staging.gated(decoded):
            return changes
        agent, offset, number = message.pub_agent_name, record.offset, message.sequence
        if self.commands.cleared(agent, offset, number) or (
            self.staging.statuses.verdict(agent, offset).open and not self.commands.paused
        ):
            return changes
        self._commit_or_retry(changes)  # what came before it is not held back with it
        self.staging.wait(agent, offset, number, lambda: self.role.active)
        if not self.role.active:  # lapsed while waiting: nothing of it runs, not even a hook
            raise WriterDeposed(f"the writer lease of {self.store.location} lapsed")
        return self.store.begin()

    def _commit_or_retry(self, changes: ChangeSet) -> None:
        try:
            self._commit(changes)
        except AttemptFailed as failed:  # a one-package commit failed
            self._retry_unit(changes.units[0], failed.cause)

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
        if not self.role.active:  # the lease lapsed: the store's guard would refuse it too
            raise WriterDeposed(f"the writer lease of {self.store.location} lapsed")
        try:
            with self._slot():
                started = time.monotonic()  # the commit's time: not the wait for its slot
                self.store.commit(changes)
        except (WriterDeposed, Stopped):
            raise
        except Exception as exc:
            if len(changes.units) == 1:
                raise AttemptFailed(changes.units[0].offset, exc) from exc
            log.warning(
                "%s: batch %s failed (%s); importing its packages one by one",
                self.name,
                changes.summary()["offsets"],
                exc,
            )
            self._batch = 1
            for unit in changes.units:
                single = self.store.begin()
                single.add(unit)
                try:
                    self._commit(single)
                except AttemptFailed as failed:
                    self._retry_unit(unit, failed.cause)
            return
        self._committed(changes, time.monotonic() - started)

    def _committed(self, changes: ChangeSet, elapsed: float) -> None:
        now = now_ms()
        for unit in changes.units:
            if unit.package is not None:
                self.metrics.package_imported(unit.package.ByteSize(), unit.created_ms, now)
                self.readiness.on_imported(unit.created_ms)
            if unit.unmodelled is not None and unit.unmodelled.counts:
                self.metrics.unmodelled(unit.unmodelled.counts)
                self.reporter.unmodelled(unit.offset, unit.pub_agent, unit.pkg_id, unit.unmodelled)
        self.metrics.batch_imported(len(changes.units), elapsed)
        if self.store.state is not None:
            self.metrics.store_scopes.set(self.store.state.scopes)
        self.counters.import_seconds.append(elapsed)
        self.counters.commits += 1
        self.counters.last_batch = len(changes.units)
        self.counters.imported += sum(1 for u in changes.units if u.package is not None)
        self._unstored_skips = 0
        self._advance(changes)
        log.info(
            "%s: committed offsets %d..%d (%d packages, %d upserts, %d scopes) in %.2f s",
            self.name,
            changes.first_offset,
            changes.last_offset,
            len(changes.units),
            len(changes.upserts),
            len(changes.scopes),
            elapsed,
            extra={
                "agent": self.name,
                "offset": changes.last_offset,
                "first_offset": changes.first_offset,
                "packages": len(changes.units),
            },
        )
        self.bookkeeping.send_pending_statuses()
        self.maintenance.committed()
        self._post_hooks(changes)

    def _post_hooks(self, changes: ChangeSet) -> None:
        """The post hooks of each package of a commit just done. A failure cannot be mended by
        importing the package again (its content is committed, its offset passed): it is
        logged, counted and reported (error queue, failure event) as a failure after the
        commit, and the import goes on."""
        if not self.hooks.hooks:
            return
        result = ImportResult(self.store.location, changes.first_offset, changes.last_offset)
        for unit in changes.units:
            if unit.package is None:  # skipped, cleared or failed: not imported
                continue
            package = HookPackage(
                self.name, unit.pub_agent, unit.pkg_id, unit.offset, unit.req_type, unit.package
            )
            for failure in self.hooks.post(package, result):
                self.reporter.report(
                    unit.offset,
                    unit.pub_agent,
                    unit.pkg_id,
                    failure,
                    committed=True,
                    sequence=unit.sequence,
                )

    def _advance(self, changes: ChangeSet) -> None:
        self.processed_offset = changes.last_offset
        self.readiness.on_position(changes.last_offset + 1)
        created = [u.created_ms for u in changes.units if u.created_ms]
        if created:
            self.latest_seen_ms = max(created)

    # ------------------------------------------------------------------ failures
    def _retry(self, record: Record, cause: BaseException) -> None:
        """Retry the package at ``record`` (re-read each time: a blob may appear)."""

        def attempt() -> None:
            changes = self.store.begin()
            changes.add(self.triage.unit(record, changes=changes))
            self._commit(changes)

        message = self.decoder.decode(record).package_message
        agent = message.pub_agent_name if message else self.settings.pub_agents[0]
        pkg_id = message.pkg_id if message else ""
        sequence = message.sequence if message else 0
        self.retries.retry(record.offset, agent, pkg_id, cause, attempt, sequence)

    def _retry_unit(self, unit: Unit, cause: BaseException) -> None:
        def attempt() -> None:
            changes = self.store.begin()
            changes.add(unit)
            self._commit(changes)

        self.retries.retry(unit.offset, unit.pub_agent, unit.pkg_id, cause, attempt, unit.sequence)

    def _skip(self, offset: int, agent: str, status: int | None, sequence: int) -> None:
        changes = self.store.begin()
        changes.add(Unit(offset, agent, "", m.ReqType.TEST, None, status, sequence=sequence))
        self._unstored_skips = self.settings.skip_store_every  # always store this one
        self._commit(changes)
