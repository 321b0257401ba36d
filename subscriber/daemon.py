"""Run one subscriber agent as a process until SIGTERM/SIGINT: ``scd subscriber``.

Settings come from the environment (``SCD_SUBSCRIBER_*``, see subscriber/settings.py).
Shutdown lets the import in progress finish or not start, so the store stays exactly-once.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from contextlib import ExitStack
from types import FrameType

from blobstore.factory import open_blob_store
from journal.factory import open_journal
from journal.topics import topic_specs
from runtime.errors import ScdError
from subscriber.agent import SubscriberAgent
from subscriber.bookkeeper.behind_log import reset_position
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
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: stopping", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
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
        start: list[int] = []
        if not _wait_for(
            lambda: start.append(reset_position(journal, settings)), "the journal", stop
        ):
            return 0
        log.info(
            "subscriber %s: a new store starts at offset %d (reset=%s); a store holding an "
            "offset resumes from it",
            settings.agent_name,
            start[0],
            settings.reset,
        )
        spark = spark_session(settings, f"scd-subscriber-{settings.agent_name}")
        stack.callback(spark.stop)
        blobs = None
        if settings.blobstore is not None:
            blobs = stack.enter_context(open_blob_store(settings.blobstore))
        lease = WriterLease(
            lease_object(settings.store_path, settings.blobstore),
            new_owner(settings.agent_name),
            settings.writer_lease_ttl_s,
            settings.writer_lease_renew_s,
        )
        agent = SubscriberAgent(
            settings,
            journal,
            DeltaStore(spark, settings.store_path),
            blobs,
            lease=lease,
            start_offset=start[0],
        )
        # The import loop claims and opens the store once this process holds its writer
        # lease; until then it is a standby (docs/one-writer-per-store.md).
        agent.start()
        stack.callback(agent.stop)  # runs before the journal, blob store and Spark close
        if settings.http_port is not None:
            server = HealthServer(
                agent.health,
                agent.ready,
                agent.metrics.render,
                host=settings.http_host,
                port=settings.http_port,
            )
            server.start()
            stack.callback(server.stop)
            log.info("health, readiness and metrics on %s", server.url)
        log.info("subscriber %s running on store %s", agent.name, settings.store_path)
        stop.wait()
    return 0
