"""Run one publisher agent with its REST API until SIGTERM/SIGINT: ``scd publisher``.

Settings come from the environment: ``SCD_PUBLISHER_*`` (publisher/settings.py),
``SCD_JOURNAL_*`` and ``SCD_BLOB_*``. Uvicorn handles the signals: it stops accepting requests,
lets those in flight answer, then the agent stops (a leader hands leadership over at once).
"""

from __future__ import annotations

import logging
import signal
from types import FrameType

import uvicorn

from blobstore import BlobStoreSettings, open_blob_store
from journal.factory import open_journal
from journal.settings import JournalSettings
from publisher.agent import PublisherAgent
from publisher.api import create_app
from publisher.settings import PublisherSettings

log = logging.getLogger(__name__)

# Requests in flight get this long to answer after SIGTERM; a distribute waits for the log's
# acknowledgement, which the journal's send timeout (30 s) bounds.
GRACEFUL_SHUTDOWN_S = 35


def run(
    settings: PublisherSettings, journal_settings: JournalSettings, blob_settings: BlobStoreSettings
) -> int:
    blobs = open_blob_store(blob_settings)
    with open_journal(journal_settings) as journal:
        agent = PublisherAgent(settings, journal_settings, journal, blobs).start()
        try:
            config = uvicorn.Config(
                create_app(agent),
                host=settings.host,
                port=settings.port,
                log_config=None,
                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
            )
            # Once uvicorn has shut down after SIGTERM/SIGINT it raises the signal again for the
            # handler found at start; with the default one that kills the process before the
            # agent below stops (leadership kept until its session times out, exit by signal).
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, _after_server_exit)
            uvicorn.Server(config).run()
        finally:
            agent.stop()
            blobs.close()
    return 0


def _after_server_exit(signum: int, _frame: FrameType | None) -> None:
    log.info("signal %d: stopping the agent", signum)
