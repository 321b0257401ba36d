"""Run one subscriber agent as a process until SIGTERM/SIGINT: ``python -m subscriber``.

Settings come from the environment (``SCD_SUBSCRIBER_*``, see subscriber/settings.py).
Shutdown lets the import in progress finish or not start, so the store stays exactly-once.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from types import FrameType

from blobstore.factory import open_blob_store
from journal.errors import ScdError
from journal.factory import open_journal
from journal.logs import configure_logging
from journal.topics import topic_specs
from subscriber.agent import SubscriberAgent
from subscriber.http import HealthServer
from subscriber.settings import SubscriberSettings
from subscriber.spark import spark_session

log = logging.getLogger(__name__)


def run(settings: SubscriberSettings) -> int:
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: stopping", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    spark = spark_session(settings, f"scd-subscriber-{settings.agent_name}")
    blobs = open_blob_store(settings.blobstore) if settings.blobstore is not None else None
    with open_journal(settings.journal) as journal:
        journal.create_topics(topic_specs(settings.journal))
        agent = SubscriberAgent(settings, journal, spark, blobs).start()
        server = None
        if settings.http_port is not None:
            server = HealthServer(
                agent.health,
                agent.readiness.check,
                agent.metrics.render,
                host=settings.http_host,
                port=settings.http_port,
            )
            server.start()
            log.info("health, readiness and metrics on %s", server.url)
        log.info("subscriber %s running (instance %s)", agent.name, agent.instance_id)
        stop.wait()
        agent.stop()
        if server is not None:
            server.stop()
    if blobs is not None:
        blobs.close()
    spark.stop()
    return 0


def main() -> int:
    configure_logging()
    try:
        settings = SubscriberSettings()
    except ValueError as exc:
        print(f"scd subscriber: invalid settings: {exc}", file=sys.stderr)
        return 2
    try:
        return run(settings)
    except ScdError as exc:
        print(f"scd subscriber: {exc}", file=sys.stderr)
        return 1
