"""Run subscriber agents as a process until SIGTERM/SIGINT: ``scd subscriber``.

Settings come from the environment (``SCD_SUBSCRIBER_*``, see subscriber/settings.py). One
agent, or several listed in an agents file (subscriber.fleet.agents_file): one journal client,
one blob store client, one Spark driver and one HTTP endpoint serve them all, each agent with
its own store, writer lease, threads and metrics label. One agent is the case of one.
SIGHUP re-reads the agents file: agents it adds start on the running driver (no JVM start),
agents it no longer lists stop; one it lists with other settings keeps running as it was.
Shutdown lets the import in progress finish or not start, so the store stays exactly-once.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import threading
from collections.abc import Callable
from contextlib import ExitStack
from types import FrameType
from typing import Any

from blobstore.api import BlobStore
from blobstore.factory import open_blob_store
from blobstore.oak import OakDataStore, OakDataStoreSettings
from journal.api import Journal
from journal.factory import open_journal
from journal.topics import topic_specs
from runtime.errors import ConfigError, ScdError
from subscriber.agent import SubscriberAgent
from subscriber.bookkeeper.behind_log import reset_position
from subscriber.fleet.agents_file import agent_settings
from subscriber.fleet.commit_slots import CommitSlots
from subscriber.fleet.view import AgentsView
from subscriber.hooks.loading import check_hook_names
from subscriber.http import HealthServer
from subscriber.maintenance.fold_worker import FoldWorker
from subscriber.reads.api import ReadApi
from subscriber.settings import SubscriberSettings
from subscriber.spark import spark_session
from subscriber.start_report import StartReport
from subscriber.store.delta import DeltaStore
from subscriber.writer.lease import WriterLease, lease_object, lease_place, new_owner

log = logging.getLogger(__name__)

# Pause between start-up attempts while Kafka or the blob store is unreachable: a broker
# starts in seconds, and a line every 5 s shows the wait without flooding the log.
STARTUP_RETRY_S = 5.0
# How often the main thread looks for a SIGHUP (a signal handler only sets a flag).
RELOAD_CHECK_S = 1.0


def _wait_for(step: Callable[[], None], what: str, stop: threading.Event) -> bool:
    """Run a start-up step, retrying while a dependency is unreachable; False if stopped."""
    while True:
        try:
            step()
            return True
        except ScdError as exc:
            if not exc.retriable:
                raise
            log.warning("waiting for %s: %s (retrying in %.0f s)", what, exc, STARTUP_RETRY_S)
        if stop.wait(STARTUP_RETRY_S):
            return False


def _signals() -> tuple[threading.Event, threading.Event]:
    """Events set by SIGTERM/SIGINT (stop) and by SIGHUP (reload the agents file)."""
    stop, reload = threading.Event(), threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: stopping", signum)
        stop.set()

    def on_hangup(_signum: int, _frame: FrameType | None) -> None:
        reload.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_hangup)
    return stop, reload


def _check_lease(one: SubscriberSettings) -> None:
    """Refuse (exit 2) a store without a writer lease every writer sees
    (subscriber.writer.location), naming the agent."""
    try:
        lease_place(one.store_path, one.blobstore, one.single_host_lease_dir)
    except ConfigError as exc:
        raise ConfigError(f"agent {one.agent_name}: {exc}") from None


def run(settings: SubscriberSettings) -> int:
    """Run the agents of ``settings`` (one, or those of its agents file) until a signal."""
    report = StartReport()
    report.mark("process")
    stop, reload = _signals()
    each = agent_settings(settings)  # a bad agents file stops the start here
    for one in each:  # so does an unknown import hook, before Kafka and Spark are waited for
        check_hook_names(one)
        _check_lease(one)  # and a store no writer lease can guard
    oak = OakDataStore.from_settings(OakDataStoreSettings())  # SCD_OAK_*: so does a bad key
    with ExitStack() as stack:
        journal = stack.enter_context(open_journal(settings.journal))
        # The journal first: waiting for Kafka should not hold a Spark JVM.
        if settings.journal.create_topics and not _wait_for(
            lambda: journal.create_topics(topic_specs(settings.journal)), "the journal", stop
        ):
            return 0
        # Where a new store starts is fixed now, before Spark and the store open (tens of
        # seconds): a package distributed meanwhile is imported, not skipped
        # (subscriber.bookkeeper.behind_log).
        starts = _start_positions(journal, each, stop)
        if starts is None:
            return 0
        report.mark("journal")
        # One Spark driver for every agent; each agent gets its own session (per-session
        # commit settings, subscriber.store.delta) on the shared JVM.
        spark = spark_session(
            settings,
            f"scd-subscriber-{each[0].agent_name}" if len(each) == 1 else "scd-subscribers",
            stores=[s.store_path for s in each],
        )
        stack.callback(spark.stop)
        report.mark("spark")
        blobs = None
        if settings.blobstore is not None:
            blobs = stack.enter_context(open_blob_store(settings.blobstore))

        slots = CommitSlots(settings.concurrent_commits or os.cpu_count() or 1)
        fold_worker = fold_worker_of(settings, spark, stack)

        def make_agent(one: SubscriberSettings, start: int) -> SubscriberAgent:
            return SubscriberAgent(
                one,
                journal,
                DeltaStore(spark.newSession(), one.store_path, fold_worker),
                blobs,
                lease=WriterLease(
                    lease_object(one.store_path, settings.blobstore, one.single_host_lease_dir),
                    new_owner(one.agent_name),
                    one.writer_lease_ttl_s,
                    one.writer_lease_renew_s,
                ),
                start_offset=start,
                commit_slots=slots,
                oak=oak,
                start_report=report.child(),
            )

        agents = [make_agent(one, starts[one.agent_name]) for one in each]
        view = AgentsView(agents)
        # Each import loop claims and opens its store once this process holds the store's
        # writer lease; until then that agent is a standby (docs/one-writer-per-store.md).
        # An agent's failures stay in its own supervised threads: the others go on.
        # Stopped before the journal, blob store and Spark close (those running by then).
        stack.callback(lambda: _stop_all(list(agents), fold_worker))
        for agent in agents:
            agent.start()
        _serve(settings, view, blobs, stack)
        for agent in agents:
            log.info("subscriber %s running on store %s", agent.name, agent.settings.store_path)
        while not stop.is_set():
            if reload.wait(RELOAD_CHECK_S) and not stop.is_set():
                reload.clear()
                _reload(settings, journal, agents, view, make_agent, stop)
    return 0


def fold_worker_of(settings: SubscriberSettings, spark: Any, stack: ExitStack) -> FoldWorker | None:
    """The process that runs the agents' folds and checkpoints at a low priority, with a local
    master (none otherwise); ``stack`` stops it."""
    if not settings.fold_worker or not settings.spark_master.startswith("local"):
        return None
    worker = FoldWorker.of(spark)
    stack.callback(worker.close)  # after the agents stopped (their callback comes later)
    return worker


def _serve(
    settings: SubscriberSettings, view: AgentsView, blobs: BlobStore | None, stack: ExitStack
) -> None:
    """The health, readiness and metrics endpoint of every agent, and their read API, if a
    port is set."""
    if settings.http_port is None:
        return
    reads = None
    if settings.read_api:
        token = settings.read_token.get_secret_value() if settings.read_token else None
        reads = ReadApi(view, blobs, token)
        stack.callback(reads.close)
    server = HealthServer(
        view.health,
        view.ready,
        view.metrics,
        reads=reads,
        host=settings.http_host,
        port=settings.http_port,
    )
    server.start()
    stack.callback(server.stop)
    log.info("health, readiness, metrics%s on %s", " and reads" if reads else "", server.url)


def _wanted(settings: SubscriberSettings) -> dict[str, SubscriberSettings] | None:
    """The agents the agents file lists now, by name; None (logged) if it has none or fails
    the start-up checks."""
    if settings.agents_file is None:
        log.warning("SIGHUP: no agents file to reload (SCD_SUBSCRIBER_AGENTS_FILE unset)")
        return None
    try:
        wanted = {one.agent_name: one for one in agent_settings(settings)}
        for one in wanted.values():
            check_hook_names(one)
    except ConfigError as exc:
        log.error("SIGHUP: agents file not applied, the agents run on as they were: %s", exc)
        return None
    return wanted


def _reload(
    settings: SubscriberSettings,
    journal: Journal,
    agents: list[SubscriberAgent],
    view: AgentsView,
    make_agent: Callable[[SubscriberSettings, int], SubscriberAgent],
    stop: threading.Event,
) -> None:
    """Apply the agents file as it is now (SIGHUP): start the agents it adds, stop those it no
    longer lists (``agents``, the running ones, and the view follow). A file that does not
    pass the start-up checks changes nothing."""
    wanted = _wanted(settings)
    if wanted is None:
        return
    running = {agent.name: agent for agent in agents}
    gone = [agent for name, agent in running.items() if name not in wanted]
    changed = sorted(n for n, a in running.items() if n in wanted and wanted[n] != a.settings)
    if changed:
        log.warning(
            "SIGHUP: settings of %s changed in the agents file; a restart applies them, they "
            "run on unchanged",
            ", ".join(changed),
        )
    # Stopped first (a new agent may take over a removed one's store), left out of the
    # endpoint last (it never shows no agent at all).
    _stop_all(gone)
    for agent in gone:
        log.info("subscriber %s stopped: no longer in the agents file", agent.name)
    added = [one for name, one in wanted.items() if name not in running]
    try:
        starts = _start_positions(journal, added, stop) or {}  # empty: stopping meanwhile
    except ScdError as exc:
        log.error("SIGHUP: no agent added, their start positions are unknown: %s", exc)
        starts = {}
    for one in added:
        if one.agent_name not in starts:
            break
        try:
            agent = make_agent(one, starts[one.agent_name])
            agent.start()
        except Exception:  # this agent alone: the running ones and the other new ones go on
            log.exception("SIGHUP: subscriber %s not started", one.agent_name)
            continue
        agents.append(agent)
        view.add(agent)
        log.info("subscriber %s running on store %s (added)", agent.name, one.store_path)
    for agent in gone:
        agents.remove(agent)
        view.remove(agent)


def _start_positions(
    journal: Journal, each: list[SubscriberSettings], stop: threading.Event
) -> dict[str, int] | None:
    """Where each agent's store starts if it is new, by agent name; None if stopped."""
    starts: dict[str, int] = {}

    def fix(settings: SubscriberSettings) -> None:
        starts[settings.agent_name] = reset_position(journal, settings)

    for settings in each:
        if not _wait_for(functools.partial(fix, settings), "the journal", stop):
            return None
        log.info(
            "subscriber %s: a new store starts at offset %d (reset=%s); a store holding an "
            "offset resumes from it",
            settings.agent_name,
            starts[settings.agent_name],
            settings.reset,
        )
    return starts


def _stop_all(agents: list[SubscriberAgent], fold_worker: FoldWorker | None = None) -> None:
    """Stop every agent at once: each finishes its commit in progress or does not start one,
    none waits for another's. The fold worker stops first: a fold or compaction in progress
    (up to minutes of a core) fails instead of holding the stop; it committed nothing, and its
    files go with the next VACUUM."""
    if fold_worker is not None:
        fold_worker.close()
    stoppers = [threading.Thread(target=agent.stop, name=f"{agent.name}-stop") for agent in agents]
    for stopper in stoppers:
        stopper.start()
    for stopper in stoppers:
        stopper.join()
