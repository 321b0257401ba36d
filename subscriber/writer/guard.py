"""The writer guard of a Delta store: once a writer claimed the store with its epoch
(subscriber.writer.lease hands out epochs), every write carries the Delta transaction id
``txnAppId`` = WRITER_APP_ID, ``txnVersion`` = epoch * EPOCH_SPAN + a sequence number.

Delta checks the id inside the commit: a write whose version is not above the one the table
holds for the app id is dropped (a claim with a later epoch came first), and a write concurrent
with a commit that set the app id fails with a conflict (a claim came in between). Both raise
``WriterDeposed``. Looking the id up makes Delta compute the full state of the snapshot the
commit starts from (a Spark job over the log: it tripled a small append); so after each write a
helper thread computes it for the version just written, which the next commit starts from when
no one else committed meanwhile (docs/benchmarks.md#subscriber_writer_guard). A store used
without a claim (tests, tools) writes no id.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from subscriber.errors import WriterDeposed

log = logging.getLogger(__name__)

# One app id per table, versions ordered by writer epoch.
WRITER_APP_ID = "scd-writer"
EPOCH_SPAN = 2**32  # writes per epoch, far beyond any tenure
# Delta sets this session setting to the version each commit of the session makes; cleared
# before a write, it stays unset when Delta dropped the write as done already. (A maintenance
# step committing in another thread of the session meanwhile, subscriber.maintenance.scheduler,
# hides a drop; the lease, lost by then, makes the process step down.)
LAST_COMMIT_VERSION = "spark.databricks.delta.lastCommitVersionInSession"
# A commit concurrent with one that set a transaction id it read: here, a claim.
CONCURRENT_TRANSACTION = "DELTA_CONCURRENT_TRANSACTION"


def _log_warm_failure(done: Future[None]) -> None:
    """A failed warm-up only costs the next commit the lookup; say so."""
    error = done.exception()
    if error is not None:
        log.info("precomputing the store's snapshot state failed: %s", error)


class WriterGuard:
    def __init__(self, spark: Any, location: str) -> None:
        self.spark = spark
        self.location = location
        self.epoch: int | None = None  # writer epoch of the last claim (None: unguarded)
        self._sequence = 0  # writes of this epoch
        # Computes the state of the version last written, for the next guarded commit.
        self._warmer = ThreadPoolExecutor(1, thread_name_prefix="delta-store-warm")

    def start_epoch(self, epoch: int) -> None:
        """The next write is the claim of ``epoch``: write 0 of the epoch."""
        self.epoch, self._sequence = epoch, -1

    def save(self, writer: Any) -> None:
        """Save a prepared DataFrameWriter: with this epoch's next transaction id once the store
        is claimed; ``WriterDeposed`` when Delta dropped the write or found a concurrent claim."""
        if self.epoch is None:
            writer.save(self.location)
            return
        self._sequence += 1
        version = self.epoch * EPOCH_SPAN + self._sequence
        writer = writer.option("txnAppId", WRITER_APP_ID).option("txnVersion", version)
        self.spark.conf.unset(LAST_COMMIT_VERSION)
        try:
            writer.save(self.location)
        except Exception as exc:
            # Delta's error class; the Python exception type depends on whether delta-spark's
            # converter recognised the Java one.
            if CONCURRENT_TRANSACTION not in str(exc):
                raise
            raise WriterDeposed(
                f"content store {self.location} was claimed by another writer during this "
                f"commit (writer epoch {self.epoch}); the commit did not land"
            ) from exc
        if self.spark.conf.get(LAST_COMMIT_VERSION, None) is None:
            raise WriterDeposed(
                f"content store {self.location} was claimed by a later writer than epoch "
                f"{self.epoch}; Delta dropped this commit"
            )
        self._warmer.submit(self.warm_state).add_done_callback(_log_warm_failure)

    def warm_state(self) -> None:
        """Compute the transaction ids of the table's latest snapshot (Delta keeps them with
        the snapshot), so the next commit's lookup does not wait for it."""
        jvm = self.spark.sparkContext._jvm
        delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
            self.spark._jsparkSession, self.location
        )
        delta_log.unsafeVolatileSnapshot().transactions()
