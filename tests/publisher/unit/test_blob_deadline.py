"""publisher/distribute/blob_deadline.py: a blob store call that does not answer fails its request
at the deadline (BlobStoreUnavailable, retriable), a call still queued then never runs, and calls
that answer go through unchanged (a real local store underneath)."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

import pytest

from blobstore import BlobInfo, BlobStoreUnavailable
from blobstore.local import LocalBlobStore
from publisher.distribute.blob_deadline import DeadlineBlobStore
from tests.blobstore.reading import read_blob

DEADLINE_S = 0.3


class HangingStore(LocalBlobStore):
    """A local store whose puts hang until released (a frozen server, as the caller sees it)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.release = threading.Event()
        self.started: list[str] = []

    def put(
        self,
        key: str,
        stream: BinaryIO,
        length: int,
        *,
        metadata: Mapping[str, str] | None = None,
        content_type: str | None = None,
    ) -> BlobInfo:
        self.started.append(key)
        self.release.wait(10)
        return super().put(key, stream, length, metadata=metadata, content_type=content_type)


@pytest.fixture
def hanging(tmp_path: Path) -> Iterator[HangingStore]:
    store = HangingStore(tmp_path / "blobs")
    yield store
    store.release.set()


def test_a_call_that_does_not_answer_fails_at_the_deadline(hanging: HangingStore) -> None:
    bounded = DeadlineBlobStore(hanging, DEADLINE_S)
    started = time.monotonic()
    with pytest.raises(BlobStoreUnavailable) as raised:
        bounded.put_bytes("packages/p1", b"data")
    elapsed = time.monotonic() - started
    assert DEADLINE_S <= elapsed < DEADLINE_S + 1.0
    assert raised.value.retriable
    assert "packages/p1" in str(raised.value)
    hanging.release.set()
    bounded.close()


def test_a_call_queued_past_its_deadline_never_runs(hanging: HangingStore) -> None:
    bounded = DeadlineBlobStore(hanging, DEADLINE_S, workers=1)
    with pytest.raises(BlobStoreUnavailable):
        bounded.put_bytes("first", b"1")  # holds the only worker
    with pytest.raises(BlobStoreUnavailable):
        bounded.put_bytes("second", b"2")  # queued behind it, then abandoned
    hanging.release.set()
    bounded.close()
    time.sleep(0.2)
    assert hanging.started == ["first"]
    assert not hanging.exists("second")


def test_calls_that_answer_go_through(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    bounded = DeadlineBlobStore(store, DEADLINE_S)
    ref = bounded.put_content_addressed(io.BytesIO(b"x" * 1000), 1000)
    assert bounded.head(ref.key).size == 1000
    assert bounded.set_metadata(ref.key, {"offset": "7"}).metadata["offset"] == "7"
    assert read_blob(bounded.within(5.0), ref.key) == b"x" * 1000
    bounded.close()
