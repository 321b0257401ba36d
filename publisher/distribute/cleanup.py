"""Blob cleanup (leader only, every 12 h by default, or on demand).

Reads the earliest and latest offsets of the package topic, then for every spilled package
blob: deleted when its stamped offset is below the earliest retained offset (no subscriber can
read its message any more); stamped with the latest offset when it has no offset yet and is
older than the grace period (an orphan of a failed send, or a lost stamp: its real offset, if
any, is below the latest). Content-addressed binaries live under another prefix and are never
touched: any number of packages, past and future, may reference them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from blobstore import BlobStore, BlobStoreError
from journal.api import Journal
from publisher.distribute.spill import OFFSET_METADATA, PackageSpill
from publisher.metrics import PublisherMetrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CleanupResult:
    earliest_offset: int
    latest_offset: int
    deleted: int
    stamped: int
    kept: int
    failed: int


class BlobCleanup:
    def __init__(
        self,
        journal: Journal,
        topic: str,
        blobs: BlobStore,
        spill: PackageSpill,
        *,
        grace_s: float,
        metrics: PublisherMetrics,
        clock_s: Callable[[], float] = time.time,
    ) -> None:
        self.journal = journal
        self.topic = topic
        self.blobs = blobs
        self.spill = spill
        self.grace_s = grace_s
        self.metrics = metrics
        self.clock_s = clock_s
        # The leader's periodic run and an on-demand run (POST /cleanup) may overlap; one at a
        # time, so each package blob is stamped or deleted once.
        self._lock = threading.Lock()

    def run(self) -> CleanupResult:
        with self._lock:
            return self._run()

    def _run(self) -> CleanupResult:
        earliest = self.journal.earliest_offset(self.topic)
        latest = self.journal.latest_offset(self.topic)
        deleted = stamped = kept = failed = 0
        for info in self.blobs.list(self.spill.key_prefix):
            raw = info.metadata.get(OFFSET_METADATA)
            try:
                offset = int(raw) if raw is not None else None
            except ValueError:
                log.warning("cleanup: %s has an invalid offset stamp %r; restamping", info.key, raw)
                offset = None
            try:
                if offset is None:
                    age = self.clock_s() - info.last_modified.timestamp()
                    if age < self.grace_s:
                        kept += 1
                        continue
                    self.blobs.set_metadata(info.key, {OFFSET_METADATA: str(latest)})
                    stamped += 1
                elif offset < earliest:
                    self.blobs.delete(info.key)
                    deleted += 1
                else:
                    kept += 1
            except BlobStoreError as exc:
                failed += 1
                log.warning("cleanup: %s failed (retried next run): %s", info.key, exc)
        self.metrics.cleanup_deleted.inc(deleted)
        self.metrics.cleanup_stamped.inc(stamped)
        result = CleanupResult(earliest, latest, deleted, stamped, kept, failed)
        log.info("package blob cleanup: %s", result)
        return result
