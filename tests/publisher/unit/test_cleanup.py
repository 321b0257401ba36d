"""The package blob cleanup against the local blob store and the embedded journal."""

from __future__ import annotations

import io
import time

from blobstore.local import LocalBlobStore
from journal.api import TopicSpec
from journal.sqlite.journal import SqliteJournal
from publisher.distribute.cleanup import BlobCleanup
from publisher.distribute.spill import OFFSET_METADATA, PackageSpill
from publisher.metrics import PublisherMetrics
from tests.journal.retention import expire_now
from tests.publisher.packages import put_packages

TOPIC = "pkgs"
GRACE_S = 60.0


def test_cleanup_deletes_below_earliest_stamps_orphans_and_keeps_the_rest(
    journal: SqliteJournal, blobs: LocalBlobStore
) -> None:
    journal.create_topics([TopicSpec(TOPIC, retention_ms=1)])
    put_packages(journal, 5, topic=TOPIC)
    time.sleep(0.01)
    expire_now(journal)
    put_packages(journal, 3, topic=TOPIC)  # offsets 5..7 retained, earliest 5, latest 8
    spill = PackageSpill(blobs, "packages", 10)
    old = spill.store("old", b"o" * 20, "x")
    spill.stamp(old, 4)
    live = spill.store("live", b"l" * 20, "x")
    spill.stamp(live, 5)
    orphan = spill.store("orphan", b"r" * 20, "x")
    bad = spill.store("bad", b"b" * 20, "x")
    blobs.set_metadata(bad, {OFFSET_METADATA: "not-a-number"})
    cas = blobs.put_content_addressed(io.BytesIO(b"binary"), 6)

    now = time.time()
    cleanup = BlobCleanup(
        journal,
        TOPIC,
        blobs,
        spill,
        grace_s=GRACE_S,
        metrics=PublisherMetrics(),
        clock_s=lambda: now + GRACE_S + 1,
    )
    result = cleanup.run()
    assert (result.earliest_offset, result.latest_offset) == (5, 8)
    assert (result.deleted, result.stamped, result.kept, result.failed) == (1, 2, 1, 0)
    assert not blobs.exists(old)
    assert blobs.exists(live)
    assert blobs.exists(cas.key)
    assert blobs.head(orphan).metadata[OFFSET_METADATA] == "8"
    assert blobs.head(bad).metadata[OFFSET_METADATA] == "8"

    # Once the log moves past the stamp, the orphan goes too.
    put_packages(journal, 2, topic=TOPIC)
    time.sleep(0.01)
    expire_now(journal)
    put_packages(journal, 1, topic=TOPIC)
    second = cleanup.run()
    assert second.deleted == 3
    assert list(blobs.list("packages/")) == []
    assert blobs.exists(cas.key)


def test_recent_unstamped_blobs_are_left_for_their_send_to_finish(
    journal: SqliteJournal, blobs: LocalBlobStore
) -> None:
    journal.create_topics([TopicSpec(TOPIC)])
    spill = PackageSpill(blobs, "packages", 10)
    key = spill.store("in-flight", b"x" * 20, "x")
    cleanup = BlobCleanup(journal, TOPIC, blobs, spill, grace_s=GRACE_S, metrics=PublisherMetrics())
    result = cleanup.run()
    assert (result.stamped, result.kept) == (0, 1)
    assert OFFSET_METADATA not in blobs.head(key).metadata
