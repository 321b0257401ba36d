"""The publisher agent: its concepts wired together, with its background threads.

Threads: the queue cache's tail consumer; two journal pollers (discovery topic: discovery and
log messages; status topic: status and log messages, both from the earliest record), and two
more per remote region (its mirrored copies of those topics, docs/regions.md); the
leader election; a maintenance loop (discovery view refresh, metrics, cache recycle) and, on
the leader only, the events loop and the cleanup loop. Every one is supervised
(runtime/supervisor.py): an unexpected exception is logged, counted and the loop restarted;
readiness fails while one is down. Expected failures (ScdError: the journal or the blob store
unreachable) are handled inside each loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from blobstore import BlobStore
from journal.api import Journal, Position
from journal.errors import JournalError
from journal.leadership import Leadership
from journal.messaging import MessagePoller
from journal.sequence import Sequencer
from journal.settings import JournalSettings
from journal.topics import topic_specs
from journal.wire.messages import DiscoveryMessage, LogMessage, PackageStatusMessage
from journal.wire.signing import signer_from_settings
from publisher.bad_records import BadRecords
from publisher.clear import Clearer
from publisher.commands import CommandSender
from publisher.discovery import DiscoveryView
from publisher.distribute.blob_deadline import DeadlineBlobStore
from publisher.distribute.builder import PackageBuilder
from publisher.distribute.cleanup import BlobCleanup, CleanupResult
from publisher.distribute.content_source import DirectoryContentSource
from publisher.distribute.distributor import Distributor
from publisher.distribute.spill import PackageSpill
from publisher.distributed_events import DistributedEvents
from publisher.leader import leader_election
from publisher.metrics import PublisherMetrics
from publisher.pause import Pauser
from publisher.queues.cache import QueueCache
from publisher.queues.error_queues import ErrorQueues
from publisher.queues.positions import package_offset
from publisher.queues.throttle import Throttle
from publisher.queues.views import Queues, QueueSummary
from publisher.replicas import ANNOUNCE_EVERY_S, LeaderDirectory
from publisher.settings import PublisherSettings
from runtime.clock import now_ms
from runtime.errors import ScdError
from runtime.supervisor import Supervisor, register_metrics

log = logging.getLogger(__name__)

# After a failed leader job (journal unreachable), wait this long before the next attempt.
JOB_ERROR_BACKOFF_S = 1.0
# Start-up retries journal errors this long (a broker starting, a new topic's partition leader
# being elected) before giving up, every half second.
STARTUP_TIMEOUT_S = 30.0
STARTUP_RETRY_S = 0.5
# How long stop() waits for each background thread: longer than any poll timeout or leader
# job step, short enough for a SIGTERM to end the process promptly.
STOP_TIMEOUT_S = 10.0
# How often the leader checks whether its announcement is due (and notices it became leader).
ANNOUNCE_TICK_S = 0.25
# Readiness re-checks the journal at most this often; a probe every second must not turn into
# a broker request every second.
READINESS_CACHE_S = 5.0


@dataclass(frozen=True)
class AgentStatus:
    agent_name: str
    instance_id: str
    leader: bool
    started: bool


class PublisherAgent:
    def __init__(
        self,
        settings: PublisherSettings,
        journal_settings: JournalSettings,
        journal: Journal,
        blobs: BlobStore,
        *,
        leadership: Leadership | None = None,
        clock_ms: Callable[[], int] = now_ms,
    ) -> None:
        self.settings = settings
        self.journal_settings = journal_settings
        self.journal = journal
        self.blobs = blobs
        self.metrics = PublisherMetrics()
        register_metrics(self.metrics.registry)
        topics = journal_settings.topics
        self.topics = topics
        source = DirectoryContentSource(settings.content_root) if settings.content_root else None
        # What a distribute request asks of the blob store answers within a deadline
        # (publisher/distribute/blob_deadline.py): a frozen S3 server fails the request, never hangs
        # it.
        self.request_blobs = DeadlineBlobStore(blobs, settings.blob_timeout_s)
        self.builder = PackageBuilder(
            self.request_blobs,
            source,
            binary_threshold_bytes=settings.binary_threshold_bytes,
            max_package_bytes=settings.max_package_bytes,
            filevault=settings.package_type == "filevault",
        )
        self.spill = PackageSpill(
            self.request_blobs,
            settings.package_key_prefix,
            settings.inline_package_limit_bytes,
            stamp_blobs=self.request_blobs.within(settings.stamp_timeout_s),
        )
        # Loaded here so that an unreadable key stops the start (ConfigError naming the
        # setting); None: records go unsigned (warned about at start outside dev mode).
        self.signer = signer_from_settings(settings)
        # Package and command records are numbered from the log's tail (journal/sequence.py);
        # with a signing key only records the agent's own key signed count there.
        own_key = self.signer.verifier() if self.signer is not None else None
        # A record waits for its number (after a failed send, for the records in flight), then
        # may read the log's tail (one metadata request): together within the send timeout, so
        # a distribute behind a hung broker answers as soon as one alone would.
        number_wait_s = max(
            1.0, journal_settings.send_timeout_s - journal_settings.request_timeout_s
        )
        # Only the leader writes numbered records (publisher/replicas.py); the others forward.
        self.sequencers = [
            Sequencer(
                journal,
                topic,
                settings.agent_name,
                own_key,
                wait_s=number_wait_s,
                may_write=lambda: self.leadership.is_leader,
            )
            for topic in (topics.package, topics.command)
        ]
        self.directory = LeaderDirectory(
            journal,
            settings.leader_topic,
            settings.agent_name,
            settings.instance_id,
            settings.api_url(),
        )
        self.distributor = Distributor(
            journal,
            topics.package,
            self.builder,
            self.spill,
            agent_name=settings.agent_name,
            instance_id=settings.instance_id,
            metrics=self.metrics,
            throttle=self.hold_back,
            sequencer=self.sequencers[0],
            signer=self.signer,
        )
        self.throttle = Throttle(settings.throttle_queue_limit, settings.throttle_max_delay_s)
        # Largest queue of an alive editable subscriber, as of the last maintenance pass.
        self.throttle_queue_size = 0
        self.cache = QueueCache(
            journal,
            topics.package,
            settings.agent_name,
            fetch_timeout_s=settings.fetch_timeout_s,
            metrics=self.metrics,
            poll_timeout_s=settings.poll_timeout_s,
        )
        self.discovery = DiscoveryView(
            settings.discovery_ttl_s,
            clock_ms,
            max_subscribers=settings.max_subscribers,
            metrics=self.metrics,
        )
        self.errors = ErrorQueues(
            settings.agent_name,
            max_subscribers=settings.max_subscribers,
            metrics=self.metrics,
            locate=lambda number: package_offset(self.cache, number),
        )
        # Discovery and status records: a bad one is skipped and counted, never a crash.
        self.bad_records = BadRecords(self.metrics.bad_records, log)
        self.queues = Queues(
            self.cache,
            self.discovery,
            self.errors,
            agent_name=settings.agent_name,
            topic=topics.package,
            blocked_after_attempts=settings.blocked_after_attempts,
            clock_ms=clock_ms,
            aggregate=settings.aggregate_subscriber_queues,
        )
        commands = CommandSender(
            journal, topics.command, settings.agent_name, self.sequencers[1], self.signer
        )
        self.clearer = Clearer(commands, self.queues)
        self.pauser = Pauser(commands, self.queues)
        self.events = DistributedEvents(
            journal,
            topics.event,
            self.cache,
            self.discovery,
            agent_name=settings.agent_name,
            instance_id=settings.instance_id,
            metrics=self.metrics,
        )
        self.cleanup = BlobCleanup(
            journal,
            topics.package,
            blobs,
            self.spill,
            grace_s=settings.cleanup_grace_s,
            metrics=self.metrics,
        )
        self.leadership = leadership or journal.leadership(leader_election(settings))
        self._pollers: list[MessagePoller] = []
        self._stop = threading.Event()
        self.supervisor = Supervisor(self._stop)
        # Loop state kept across a supervised restart (a restart must not re-run a job early).
        self._last_recycle = time.monotonic()
        self._last_cleanup: float | None = None
        self._started = False
        self._ready_checked = 0.0
        self._announced = 0.0  # time.monotonic() of the last leader announcement
        self._ready = False
        self._skips_reported: dict[tuple[str, str], int] = {}

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> PublisherAgent:
        if self.signer is None and not self.settings.dev_mode:
            log.warning(
                "package and command records are sent unsigned: set SCD_PUBLISHER_SIGNING_KEY "
                "and SCD_PUBLISHER_SIGNING_KEY_ID in production (docs/security.md)"
            )
        if self.journal_settings.create_topics:
            self._at_startup(lambda: self.journal.create_topics(topic_specs(self.journal_settings)))
        self._at_startup(self.cache.open)
        self.cache.start()
        self._pollers = [
            *self._region_pollers("", remote=False),
            *(
                poller
                for prefix in self.settings.remote_topic_prefixes
                for poller in self._region_pollers(prefix, remote=True)
            ),
        ]
        for poller in self._pollers:
            poller.start()
        self._at_startup(self.directory.open)
        self.leadership.start(self._leadership_changed)
        self.supervisor.watch(
            self.cache.thread, *(p.thread for p in self._pollers), self.leadership.thread
        )
        self._spawn("publisher-maintenance", self._maintenance_loop)
        self._spawn("publisher-announce", self._announce_loop)
        if self.settings.events_enabled:
            self._spawn("publisher-events", self._events_loop)
        self._spawn("publisher-cleanup", self._cleanup_loop)
        self._started = True
        log.info(
            "publisher agent %s (instance %s) started",
            self.settings.agent_name,
            self.settings.instance_id,
        )
        return self

    def _region_pollers(self, prefix: str, *, remote: bool) -> list[MessagePoller]:
        """Pollers of one region's discovery and status topics, from the earliest record: the
        publisher's own (no prefix), or another region's mirrored copies, whose offsets are
        the copy's (placed by sequence number, publisher/queues/positions.py)."""
        guarded = self.bad_records.guarded
        errors = self.errors
        log_handler = guarded(errors.handle_remote_log if remote else errors.handle_log)
        status_handler = guarded(errors.handle_remote_status if remote else errors.handle_status)
        announce = self.discovery.handle_remote if remote else self.discovery.handle
        name = f"publisher-{prefix}" if remote else "publisher-"
        return [
            MessagePoller(
                self.journal,
                prefix + self.topics.discovery,
                Position.earliest(),
                {DiscoveryMessage: guarded(announce), LogMessage: log_handler},
                name=name + "discovery",
                poll_timeout_s=self.settings.poll_timeout_s,
            ),
            MessagePoller(
                self.journal,
                prefix + self.topics.status,
                Position.earliest(),
                {PackageStatusMessage: status_handler, LogMessage: log_handler},
                name=name + "status",
                poll_timeout_s=self.settings.poll_timeout_s,
            ),
        ]

    def stop(self) -> None:
        self._stop.set()
        # Each component waits up to one poll timeout to notice; stop them side by side.
        stoppers = [
            threading.Thread(target=stop, name="publisher-stop")
            for stop in [self.leadership.stop, self.cache.stop, *(p.stop for p in self._pollers)]
        ]
        for thread in stoppers:
            thread.start()
        for thread in stoppers:
            thread.join(STOP_TIMEOUT_S)
        self.supervisor.join(STOP_TIMEOUT_S)
        for sequencer in self.sequencers:
            sequencer.close()
        self.request_blobs.close()
        self._started = False
        log.info("publisher agent %s stopped", self.settings.agent_name)

    def _at_startup(self, step: Callable[[], None]) -> None:
        """Run a start-up step, retrying journal errors: a topic just created may have no
        partition leader for a moment, a broker may still be starting."""
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            try:
                step()
                return
            except JournalError as exc:
                if time.monotonic() > deadline:
                    raise
                log.info("publisher start: %s; retrying", exc)
                time.sleep(STARTUP_RETRY_S)

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        self.supervisor.spawn(name, target)

    def _leadership_changed(self, leader: bool) -> None:
        self.metrics.leader.set(1 if leader else 0)
        # A new leader opens its writers (fencing the last leader's) and reads the log again;
        # one that lost leadership writes no more.
        for sequencer in self.sequencers:
            sequencer.reset()
        self._announced = 0.0
        if not leader:
            self.events.reset()

    # ------------------------------------------------------------------ loops
    def _maintenance_loop(self) -> None:
        while not self._stop.wait(self.settings.view_refresh_s):
            try:
                self.discovery.refresh()
                self.update_metrics()
                if time.monotonic() - self._last_recycle >= self.settings.queue_cache_recycle_s:
                    self._last_recycle = time.monotonic()
                    self.recycle_cache()
            except ScdError as exc:
                log.warning("publisher maintenance failed (retried): %s", exc)

    def _announce_loop(self) -> None:
        """The leader says where it serves (publisher/replicas.py), at once when it became
        leader, then every ANNOUNCE_EVERY_S."""
        while not self._stop.wait(ANNOUNCE_TICK_S):
            if not self.leadership.is_leader:
                continue
            if time.monotonic() - self._announced < ANNOUNCE_EVERY_S:
                continue
            try:
                self.directory.announce()
                self._announced = time.monotonic()
            except JournalError as exc:
                log.warning("announcing the leader failed (retried): %s", exc)

    def _events_loop(self) -> None:
        while not self._stop.wait(self.settings.view_refresh_s):
            self.run_events_once()

    def run_events_once(self) -> int:
        with self.leadership.jobs_lock:
            if not self.leadership.is_leader:
                return 0
            try:
                return self.events.tick()
            except ScdError as exc:
                log.warning("distributed events failed (retried): %s", exc)
        self._stop.wait(JOB_ERROR_BACKOFF_S)
        return 0

    def _cleanup_loop(self) -> None:
        while not self._stop.wait(self.settings.view_refresh_s):
            if not self.leadership.is_leader:
                self._last_cleanup = None
                continue
            now = time.monotonic()
            last = self._last_cleanup
            if last is not None and now - last < self.settings.cleanup_interval_s:
                continue
            # Marked before the run: after a failure (supervised restart) too, the next
            # attempt waits for the next period.
            self._last_cleanup = now
            try:
                self.cleanup.run()
            except ScdError as exc:
                log.warning("package blob cleanup failed (retried next period): %s", exc)

    def run_cleanup(self) -> CleanupResult:
        return self.cleanup.run()

    def recycle_cache(self) -> int:
        """Drop cache entries below what alive subscribers and the event notifier need."""
        needed = [
            s.processed_offset + 1
            for s in self.queues.summaries()
            if s.processed_offset is not None
        ]
        if self.events.last_offset is not None:
            needed.append(self.events.last_offset + 1)
        keep_from = min(needed) if needed else self.cache.next_offset
        return self.cache.recycle(keep_from)

    def hold_back(self) -> float:
        """Hold a distribute request back as long as throttling asks, or until the agent
        stops; returns how long it was held."""
        delay = self.throttle.delay_s(self.throttle_queue_size)
        if delay <= 0:
            return 0.0
        self.metrics.throttled_requests.inc()
        log.info(
            "distribute request held back %.1f s: an editable subscriber queue holds %d items",
            delay,
            self.throttle_queue_size,
        )
        started = time.monotonic()
        self._stop.wait(delay)
        return time.monotonic() - started

    def update_metrics(self) -> list[QueueSummary]:
        summaries = self.queues.summaries()
        m = self.metrics
        self.throttle_queue_size = max(
            (s.size for s in summaries if s.subscriber.editable), default=0
        )
        m.throttle_queue_size.set(self.throttle_queue_size)
        m.throttle_delay.set(self.throttle.delay_s(self.throttle_queue_size))
        m.subscriber_count.set(len(summaries))
        # What an autoscaler scales on: totals over the alive subscribers.
        m.fleet_lag_packages.set(sum(s.size for s in summaries))
        m.fleet_max_lag_packages.set(max((s.size for s in summaries), default=0))
        m.fleet_max_lag_seconds.set(max((s.lag_ms for s in summaries), default=0) / 1000)
        # One series per alive subscriber, whose number the discovery view caps.
        m.set_per_queue(m.queue_size, {s.name: s.size for s in summaries})
        m.set_per_queue(m.queue_lag, {s.name: s.lag_ms / 1000 for s in summaries})
        m.set_per_queue(
            m.error_queue_size, {s.error_queue_name: s.error_queue_size for s in summaries}
        )
        for poller in self._pollers:
            for reason in ("unknown_type", "undecodable", "handler_error"):
                count = poller.counts[reason]
                seen = self._skips_reported.get((poller.topic, reason), 0)
                if count > seen:
                    m.skipped_records.labels(poller.topic, reason).inc(count - seen)
                    self._skips_reported[(poller.topic, reason)] = count
        return summaries

    # ------------------------------------------------------------------ state
    def status(self) -> AgentStatus:
        return AgentStatus(
            self.settings.agent_name,
            self.settings.instance_id,
            self.leadership.is_leader,
            self._started,
        )

    def ready(self) -> bool:
        return self.readiness()[0]

    def readiness(self) -> tuple[bool, str]:
        """(ready, why not): started, no background thread down, the journal answered
        recently."""
        if not self._started:
            return False, "not started"
        threads_ok, threads = self.supervisor.health()
        if not threads_ok:
            return False, threads
        now = time.monotonic()
        if now - self._ready_checked >= READINESS_CACHE_S or not self._ready:
            self._ready_checked = now
            try:
                self.journal.latest_offset(self.topics.package)
                self._ready = True
            except JournalError as exc:
                log.warning("publisher not ready: %s", exc)
                self._ready = False
        return (True, "ready") if self._ready else (False, "journal unreachable")
