"""Run subscriber agents as a process until SIGTERM/SIGINT: ``scd subscriber``.

Settings come from the environment (``SCD_SUBSCRIBER_*``, see subscriber/settings.py). One
agent, or several listed in an agents file (subscriber.fleet.agents_file): one journal client,
one blob store client, one Spark driver and one HTTP endpoint serve them all, each agent with
its own store, writer lease, threads and metrics label. One agent is the case of one.
Shutdown lets the import in progress finish or not start, so the store stays exactly-once.
"""

from __future__ import annotations

import functools
import logging
import signal
import threading
from collections.abc import Callable
from contextlib import ExitStack
from types import FrameType

from blobstore.factory import open_blob_store
from journal.api import Journal
from journal.factory import open_journal
from journal.topics import topic_specs
from runtime.errors import ScdError
from subscriber.agent import SubscriberAgent
from subscriber.bookkeeper.behind_log import reset_position
from subscriber.fleet.agents_file import agent_settings
from subscriber.fleet.view import AgentsView
from subscriber.hooks.loading import check_hook_names
from subscriber.http import HealthServer
from subscriber.settings import SubscriberSettings
from subscriber.spark import spark_session
from subscriber.store.delta import DeltaStore
from subscriber.writer.lease import WriterLease, lease_object, new_owner

log = logging.getLogger(__name__)

# Pause between start-up attempts while Kafka or the blob store is unreachable: a broker
# starts in seconds, and a line every 5 s shows the wait without flooding the log.
STARTUP_RETRY_S = 5.0


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


def run(settings: SubscriberSettings) -> int:
    """Run the agents of ``settings`` (one, or those of its agents file) until a signal."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: stopping", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    each = agent_settings(settings)  # a bad agents file stops the start here
    for one in each:  # so does an unknown import hook, before Kafka and Spark are waited for
        check_hook_names(one)
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
        # One Spark driver for every agent; each agent gets its own session (per-session
        # commit settings, subscriber.store.delta) on the shared JVM.
        spark = spark_session(
            settings,
            f"scd-subscriber-{each[0].agent_name}" if len(each) == 1 else "scd-subscribers",
            stores=[s.store_path for s in each],
        )
        stack.callback(spark.stop)
        blobs = None
        if settings.blobstore is not None:
            blobs = stack.enter_context(open_blob_store(settings.blobstore))
        agents = [
            SubscriberAgent(
                one,
                journal,
                DeltaStore(spark.newSession(), one.store_path),
                blobs,
                lease=WriterLease(
                    lease_object(one.store_path, settings.blobstore),
                    new_owner(one.agent_name),
                    one.writer_lease_ttl_s,
                    one.writer_lease_renew_s,
                ),
                start_offset=starts[one.agent_name],
            )
            for one in each
        ]
        # Each import loop claims and opens its store once this process holds the store's
        # writer lease; until then that agent is a standby (docs/one-writer-per-store.md).
        # An agent's failures stay in its own supervised threads: the others go on.
        stack.callback(_stop_all, agents)  # before the journal, blob store and Spark close
        for agent in agents:
            agent.start()
        if settings.http_port is not None:
            view = AgentsView(agents)
            server = HealthServer(
                view.health,
                view.ready,
                view.metrics,
                host=settings.http_host,
                port=settings.http_port,
            )
            server.start()
            stack.callback(server.stop)
            log.info("health, readiness and metrics on %s", server.url)
        for agent in agents:
            log.info("subscriber %s running on store %s", agent.name, agent.settings.store_path)
        stop.wait()
    return 0


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


def _stop_all(agents: list[SubscriberAgent]) -> None:
    """Stop every agent at once: each finishes its commit in progress or does not start one,
    none waits for another's."""
    stoppers = [threading.Thread(target=agent.stop, name=f"{agent.name}-stop") for agent in agents]
    for stopper in stoppers:
        stopper.start()
    for stopper in stoppers:
        stopper.join()
