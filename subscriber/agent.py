"""The subscriber agent: its parts wired together, and their threads.

* the import loop (subscriber.bookkeeper.loop): the one thread writing the store, in offset order,
  with a helper thread reading the next batch ahead; it stops at offsets the package topic
  deleted unread (subscriber.bookkeeper.behind_log: state BEHIND_LOG, not ready);
* the announcer (subscriber.announcer): discovery messages and the lag;
* the command reader (subscriber.bookkeeper.commands): clear requests (editable subscribers
  only), pause and resume, which the import loop persists;
* the canaries' status reader, for a staged subscriber (subscriber.bookkeeper.staging);
* the import hooks (subscriber.hooks), run by the import thread: those given, or those
  SCD_SUBSCRIBER_IMPORT_HOOKS names (an unknown name stops the start: ConfigError);
* the writer lease (subscriber.writer.role), when given one: renewed while this process
  writes the store, watched while it is a standby;
* the read model (subscriber.reads.model), in a thread of its own: the current tree the
  daemon's read API serves, kept current by each commit.

Every thread is supervised (runtime.supervisor): an exception is logged, counted and the
thread restarted; ``ready`` answers False while one is down.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping

from blobstore.api import BlobStore
from blobstore.oak import OakDataStore
from journal.api import Journal, Position
from journal.content import rules
from journal.messaging import MessagePoller, MessageSender
from journal.wire import messages as m
from journal.wire.signing import verifier_from_settings
from runtime.supervisor import Supervisor
from subscriber.announcer import Announcer
from subscriber.bookkeeper.behind_log import LogGaps
from subscriber.bookkeeper.commands import Commands
from subscriber.bookkeeper.counters import AgentCounters
from subscriber.bookkeeper.decoding import RecordDecoder
from subscriber.bookkeeper.failures import FailureReporter
from subscriber.bookkeeper.loop import ImportLoop
from subscriber.bookkeeper.staging import CanaryStatuses, StagedImport
from subscriber.bookkeeper.statuses import Bookkeeping
from subscriber.errors import Stopped
from subscriber.fleet.commit_slots import CommitSlots
from subscriber.hooks import ImportHook, ImportHooks
from subscriber.hooks.loading import load_hooks
from subscriber.http import CanaryWait, Health
from subscriber.maintenance.scheduler import (
    IDLE_CHECKPOINT_COMMITS,
    Maintenance,
    MaintenancePolicy,
)
from subscriber.metrics import SubscriberMetrics
from subscriber.readiness import Readiness, ReadinessRules, supervised_check
from subscriber.reads.model import ReadModel
from subscriber.reads.sources import read_model
from subscriber.settings import SubscriberSettings
from subscriber.start_report import StartReport
from subscriber.store.base import Store
from subscriber.writer.lease import WriterLease
from subscriber.writer.role import WriterRole

__all__ = ["IDLE_CHECKPOINT_COMMITS", "SubscriberAgent"]


class SubscriberAgent:
    def __init__(
        self,
        settings: SubscriberSettings,
        journal: Journal,
        store: Store,
        blobs: BlobStore | None = None,
        *,
        hooks: Mapping[str, ImportHook] | None = None,
        lease: WriterLease | None = None,
        start_offset: int | None = None,
        commit_slots: CommitSlots | None = None,
        oak: OakDataStore | None = None,
        start_report: StartReport | None = None,
    ) -> None:
        """``store``: the product's is ``DeltaStore(spark, settings.store_path)``; ``lease``:
        the store's writer lease (subscriber.writer.role; None: the only writer, unchecked);
        ``start_offset``: where a new store starts, fixed when the process started
        (subscriber.bookkeeper.behind_log.reset_position; None: resolved when the store opens);
        ``hooks``: the import hooks by name, in order (None: the configured ones);
        ``commit_slots``: shared by the daemon's agents (None: this agent's alone);
        ``oak``: the Oak data store a FileVault package's binary references resolve in
        (subscriber.bookkeeper.oak_refs; None: they are imported unresolved);
        ``start_report``: this agent's start milestones, the daemon's with them (None: this
        process's, from the agent's own phases on)."""
        hooks = load_hooks(settings) if hooks is None else hooks  # a bad name stops it here
        self.settings = settings
        self.start_report = start_report if start_report is not None else StartReport()
        self.journal = journal
        self.blobs = blobs
        self.topics = settings.journal.topics
        self.store = store
        self.metrics = SubscriberMetrics(settings.agent_name)
        self.hooks = ImportHooks(hooks, self.metrics, settings.import_hook_timeout_s)
        self.readiness = Readiness(
            ReadinessRules(
                caught_up=settings.ready_caught_up,
                idle_s=settings.ready_idle_s,
                max_message_age_s=settings.ready_max_message_age_s,
                max_retries=settings.ready_max_retries,
                force_ready_s=settings.ready_force_s,
            )
        )
        self._stop = threading.Event()
        self.supervisor = Supervisor(self._stop)
        self.role = WriterRole(settings.agent_name, store.location, lease, self.metrics, self._stop)
        verifier = verifier_from_settings(settings)  # a bad key stops the start here
        limits = rules.ContentLimits(max_package_bytes=settings.max_package_bytes)
        status = MessageSender(journal, self.topics.status)
        self.commands = Commands(
            self.name,
            lambda: self.instance_id,
            settings.pub_agents,
            journal,
            (self.topics.package, self.topics.command),
            self.store,
            self.metrics,
            verifier,
            settings.editable,
        )
        self.bookkeeping = Bookkeeping(
            self.name,
            lambda: self.instance_id,
            self.store,
            status,
            self.metrics,
        )
        self.maintenance = Maintenance(
            self.name, self.store, MaintenancePolicy.from_settings(settings), self.metrics
        )
        self.announcer = Announcer(
            settings,
            journal,
            lambda: self.instance_id,
            lambda: (self.processed_offset, self.retries),
            lambda latest: self.loop.unread(latest),
            lambda: self.commands.paused,
            lambda: dict(self.store.state.sequences) if self.store.state is not None else {},
            self.metrics,
            self.readiness,
            self._stop,
        )
        self.commands.on_pause_stored = self.announcer.now.set
        self.staging: StagedImport | None = None
        if settings.staged_after:
            canaries = CanaryStatuses(
                settings.staged_after,
                settings.pub_agents,
                lambda: journal.latest_offset(self.topics.package),
                self.metrics,
            )
            self.staging = StagedImport(
                canaries, self.commands, settings.staged_wait_s, self.metrics, self._stop
            )
            self.staging.on_change = self.announcer.now.set
            self.announcer.canaries = self.staging.canaries
        self.loop = ImportLoop(
            settings,
            journal,
            self.store,
            RecordDecoder(self.topics.package, settings.pub_agents, blobs, limits, verifier, oak),
            self.commands,
            self.bookkeeping,
            self.maintenance,
            FailureReporter(
                self.name,
                lambda: self.instance_id,
                status,
                self.announcer.now.set,
                events=journal,
                event_topic=self.topics.event,
                max_retries=settings.max_retries,
            ),
            self.metrics,
            self.readiness,
            LogGaps(settings, journal, self.store, self.metrics, start_offset),
            self.role,
            self._stop,
            self.hooks,
            self.staging,
            commit_slots,
            self.start_report,
        )
        self._command_poller: MessagePoller | None = None
        self._statuses: MessagePoller | None = None
        # The read model of the store (subscriber.reads), served by the daemon's endpoint.
        self.reads: ReadModel | None = None
        if settings.read_api:
            self.reads = read_model(settings, store, settings.read_index_dir, self._read_gate)

    # ------------------------------------------------------------------ lifecycle
    @property
    def name(self) -> str:
        return self.settings.agent_name

    @property
    def instance_id(self) -> str:
        state = self.store.state
        return state.instance_id if state is not None else ""

    def open(self) -> None:
        """Try to take the writer role; once active: claim and open the store, settle the
        start position, resend statuses a crash left unsent. On standby the import loop
        opens it when it takes over."""
        self.role.tick()
        if self.role.active:
            with contextlib.suppress(Stopped):  # stopping already: nothing to open
                self.loop.open()

    def start(self) -> SubscriberAgent:
        """Run the import loop, announcer, command reader and the writer lease in supervised
        background threads. With a lease the import loop opens the store once it holds it
        (the lease is renewed meanwhile: a claim on a new store takes seconds); without one
        the store is opened first, unless done."""
        if self.role.lease is not None:
            self.supervisor.spawn(f"{self.name}-writer-lease", self.role.run)
        elif not self.loop.opened:
            self.open()
        self.supervisor.spawn(f"{self.name}-announce", self.announcer.run)
        self._command_poller = MessagePoller(
            self.journal,
            self.topics.command,
            Position.earliest(),
            {m.CommandMessage: self.commands.on_command},
            name=f"{self.name}-commands",
        ).start()
        self.supervisor.watch(self._command_poller.thread)
        if self.staging is not None:  # from the earliest: the canaries' statuses so far
            self._statuses = MessagePoller(
                self.journal,
                self.topics.status,
                Position.earliest(),
                {m.PackageStatusMessage: self.staging.statuses.on_status},
                name=f"{self.name}-canary-statuses",
            ).start()
            self.supervisor.watch(self._statuses.thread)
        self.supervisor.spawn(f"{self.name}-import", self.loop.run)
        if self.reads is not None:
            self.reads.start()
        return self

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop after the current commit (an import in progress is finished or not started)."""
        self._stop.set()
        self.announcer.now.set()
        if self._command_poller is not None:
            self._command_poller.stop()
        if self._statuses is not None:
            self._statuses.stop()
        self.supervisor.stop(timeout_s)
        self.loop.shutdown()
        if self.reads is not None:
            self.reads.stop()
        self.maintenance.wait(timeout_s)  # a step in the maintenance thread
        self.role.release()  # nothing writes any more: a standby may take over at once

    # ------------------------------------------------------------------ the import loop's view
    def run_once(self) -> int:
        """Poll and import one batch (tests drive the loop by hand)."""
        return self.loop.run_once()

    @property
    def processed_offset(self) -> int:
        return self.loop.processed_offset

    @property
    def retries(self) -> int:
        """Failed attempts of the package being retried (0 when none)."""
        return self.loop.retries.attempts

    @property
    def counters(self) -> AgentCounters:
        return self.loop.counters

    # ------------------------------------------------------------------ health
    @property
    def state(self) -> str:
        if self._stop.is_set():
            return "STOPPING"
        if not self.role.active:
            return "STANDBY"
        if not self.instance_id:
            return "STARTING"
        if self.loop.gaps.behind is not None:
            return "BEHIND_LOG"
        if self.loop.sequences.gap is not None:
            return "SEQUENCE_GAP"
        if self.commands.paused:
            return "PAUSED"
        staged = self.staging.state if self.staging is not None else None
        if staged is not None:
            return staged
        if self.retries:
            return "BLOCKED" if self.settings.max_retries < 0 else "RETRYING"
        return "RUNNING" if self.lag else "IDLE"

    @property
    def lag(self) -> int:
        """Packages on the log after the processed offset (as of the last announcement)."""
        return self.announcer.lag

    @property
    def holds_position(self) -> bool:
        """True once every package distributed from now on will be imported: a new store's
        start was fixed (at process start, by the daemon) or the store is open at its offset.
        A store that already holds an offset resumes from it, before that start."""
        return self.loop.gaps.start_offset is not None or self.loop.opened

    def health(self) -> Health:
        return Health(
            agent=self.name,
            instance_id=self.instance_id or None,
            processed_offset=self.processed_offset if self.processed_offset >= 0 else None,
            state=self.state,
            role=self.role.describe(),
            holds_position=self.holds_position,
            start_offset=self.loop.gaps.start_offset,
            canary_wait=self._canary_wait(),
            start=self._start_phases(),
        )

    def _start_phases(self) -> dict[str, float]:
        """subscriber.start_report's milestones, readiness's and the read model's with them."""
        ready_at = self.readiness.ready_at
        if ready_at is not None:
            self.start_report.mark("caught_up", ready_at)
        serving = self.reads.serving_since if self.reads is not None else None
        if serving is not None and ready_at is not None:
            self.start_report.mark("reads", max(serving, ready_at))
        return self.start_report.phases()

    def _canary_wait(self) -> CanaryWait | None:
        waiting = self.staging.waiting if self.staging is not None else None
        if waiting is None:
            return None
        offset, verdict = waiting
        return CanaryWait(offset=offset, pending=[*verdict.pending], failed=[*verdict.failed])

    def _read_gate(self) -> str | None:
        """Why the read model must not answer now (None: it may): only the active writer's
        model is current, once its store is open."""
        if self._stop.is_set():
            return "the subscriber is stopping"
        if not self.role.active:
            return f"not serving reads: {self.role.describe()}"
        if not self.loop.opened:
            return "the content store is not open yet"
        return None

    def ready(self) -> tuple[bool, str]:
        """Readiness (subscriber.readiness), False while a background thread is down, the
        subscriber holds no position yet, or it is behind the log (whatever readiness said
        before: its content misses packages it will not import)."""
        if not self.role.active:  # serves nothing: the active process imports
            return False, self.role.describe()
        if not self.holds_position:
            return False, "no position yet: where a new store starts is not fixed"
        behind = self.loop.gaps.reason() or self.loop.sequences.reason()
        if behind is not None:
            return False, behind
        ready, reason = supervised_check(self.readiness.check, self.supervisor)()
        refused = self.reads.refusal() if ready and self.reads is not None else None
        if refused is not None:  # caught up, but no content read is answered yet
            return False, f"not ready: {refused}"
        return ready, reason

    def announce(self) -> None:
        self.announcer.announce()
