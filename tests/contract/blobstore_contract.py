"""Contract of the blob store API: every backend runs this suite unchanged.

A backend's test module subclasses ``BlobStoreContract`` and provides the fixtures ``store``
(a BlobStore, possibly shared with earlier tests: each test writes under its own ``prefix``)
and ``upload_count`` (a callable returning how many objects the store has really written since
the fixture was created).
"""

from __future__ import annotations

import hashlib
import io
import os
import tracemalloc
import uuid
from collections.abc import Callable
from typing import BinaryIO, cast

import pytest

from blobstore import (
    BlobLengthMismatch,
    BlobNotFound,
    BlobStore,
    InvalidBlobKey,
    InvalidBlobMetadata,
)
from tests.blobstore.reading import read_blob

UploadCount = Callable[[], int]

MIB = 1024 * 1024

# Above the 5 MiB multipart threshold the S3 tests configure, so it goes up in two parts.
LARGE_OBJECT_BYTES = 5 * MIB + 512 * 1024

# A streaming read of LARGE_OBJECT_BYTES in small chunks must stay far below the object size
# in peak Python allocations; reading it whole would need all 5.5 MiB at once.
STREAMING_READ_PEAK_BYTES = 2 * MIB

# Size used to prove that put streams: holding it whole would break PUT_PEAK_BYTES, while a
# streaming put holds a few parts at most (about six 5 MiB parts on S3 as the tests configure
# it, measured ~33 MiB; one copy chunk on the local backend).
STREAMED_PUT_BYTES = 64 * MIB
PUT_PEAK_BYTES = 40 * MIB

# Chunk a caller reads a streaming get with.
READ_CHUNK_BYTES = 64 * 1024

# Every call of the API on key "k", for tests that make all of them fail the same way.
EVERY_CALL: dict[str, Callable[[BlobStore], object]] = {
    "put_bytes": lambda s: s.put_bytes("k", b"x"),
    "put_large": lambda s: s.put_bytes("k", b"x" * LARGE_OBJECT_BYTES),
    "put_content_addressed": lambda s: s.put_content_addressed(io.BytesIO(b"x"), 1),
    "get_bytes": lambda s: read_blob(s, "k"),
    "head": lambda s: s.head("k"),
    "exists": lambda s: s.exists("k"),
    "delete": lambda s: s.delete("k"),
    "list": lambda s: list(s.list()),
    "set_metadata": lambda s: s.set_metadata("k", {"a": "1"}),
}

TRAVERSAL_KEYS = ["../escape", "a/../../escape", "/etc/passwd", "a//b", "a/./b", "a\\..\\b", ""]


class OneWayStream(io.RawIOBase):
    """A stream that cannot seek and returns short reads, like a socket or a pipe."""

    def __init__(self, data: bytes, max_read: int = 100_000) -> None:
        super().__init__()
        self._data = memoryview(data)
        self._position = 0
        self._max_read = max_read

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        n = min(len(buffer), self._max_read, len(self._data) - self._position)
        memoryview(buffer)[:n] = self._data[self._position : self._position + n]
        self._position += n
        return n


def one_way(data: bytes) -> BinaryIO:
    """``data`` as a :class:`OneWayStream`, typed as the file object the API takes."""
    return cast(BinaryIO, OneWayStream(data))


class GeneratedStream(io.RawIOBase):
    """``length`` bytes produced on demand (never held whole), hashed as they are read."""

    def __init__(self, length: int) -> None:
        super().__init__()
        self._remaining = length
        self._block = os.urandom(MIB)
        self.sha256 = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        n = min(len(buffer), self._remaining, len(self._block))
        memoryview(buffer)[:n] = self._block[:n]
        self.sha256.update(self._block[:n])
        self._remaining -= n
        return n


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class BlobStoreContract:
    @pytest.fixture
    def prefix(self) -> str:
        return f"contract-{uuid.uuid4().hex[:12]}/"

    # ------------------------------------------------------------------ put / get / head
    def test_round_trip_of_bytes_and_metadata(self, store: BlobStore, prefix: str) -> None:
        key = f"{prefix}packages/p1"
        data = os.urandom(10_000)
        stored = store.put_bytes(
            key, data, metadata={"offset": "42", "pkg-id": "p1"}, content_type="application/x-p"
        )
        assert (stored.key, stored.size) == (key, len(data))
        assert read_blob(store, key) == data
        info = store.head(key)
        assert info.size == len(data)
        assert info.metadata == {"offset": "42", "pkg-id": "p1"}
        assert info.content_type == "application/x-p"
        assert info.last_modified.tzinfo is not None
        assert stored.metadata == info.metadata

    def test_defaults_and_empty_object(self, store: BlobStore, prefix: str) -> None:
        store.put_bytes(f"{prefix}empty", b"")
        info = store.head(f"{prefix}empty")
        assert (info.size, info.metadata, info.content_type) == (0, {}, "application/octet-stream")
        assert read_blob(store, f"{prefix}empty") == b""

    def test_put_replaces_bytes_and_metadata(self, store: BlobStore, prefix: str) -> None:
        key = f"{prefix}k"
        store.put_bytes(key, b"old", metadata={"a": "1"})
        store.put_bytes(key, b"new content", metadata={"b": "2"})
        assert read_blob(store, key) == b"new content"
        assert store.head(key).metadata == {"b": "2"}

    def test_put_reads_exactly_length_bytes(self, store: BlobStore, prefix: str) -> None:
        stream = io.BytesIO(b"0123456789")
        store.put(f"{prefix}k", stream, 4)
        assert read_blob(store, f"{prefix}k") == b"0123"
        assert stream.read() == b"456789"

    def test_short_stream_is_refused_and_stores_nothing(
        self, store: BlobStore, prefix: str
    ) -> None:
        key = f"{prefix}short"
        with pytest.raises(BlobLengthMismatch, match="50 bytes"):
            store.put(key, io.BytesIO(b"x" * 50), 100)
        assert not store.exists(key)

    def test_short_stream_keeps_previous_object(self, store: BlobStore, prefix: str) -> None:
        key = f"{prefix}kept"
        store.put_bytes(key, b"previous", metadata={"v": "1"})
        with pytest.raises(BlobLengthMismatch):
            store.put(key, one_way(b"x" * 10), 20, metadata={"v": "2"})
        assert read_blob(store, key) == b"previous"

    def test_get_streams(self, store: BlobStore, prefix: str) -> None:
        key = f"{prefix}streamed"
        data = os.urandom(LARGE_OBJECT_BYTES)
        store.put(key, one_way(data), len(data))
        digest = hashlib.sha256()
        tracemalloc.start()
        try:
            with store.get(key) as stream:
                first = stream.read(10)
                digest.update(first)
                while chunk := stream.read(READ_CHUNK_BYTES):
                    assert len(chunk) <= READ_CHUNK_BYTES
                    digest.update(chunk)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert first == data[:10]
        assert digest.hexdigest() == sha256(data)
        assert peak < STREAMING_READ_PEAK_BYTES, f"streaming read allocated {peak} bytes"

    def test_put_streams(self, store: BlobStore, prefix: str) -> None:
        key = f"{prefix}generated"
        source = GeneratedStream(STREAMED_PUT_BYTES)
        tracemalloc.start()
        try:
            info = store.put(key, cast(BinaryIO, source), STREAMED_PUT_BYTES)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert info.size == STREAMED_PUT_BYTES
        digest = hashlib.sha256()
        with store.get(key) as stream:
            while chunk := stream.read(MIB):
                digest.update(chunk)
        assert digest.hexdigest() == source.sha256.hexdigest()
        assert peak < PUT_PEAK_BYTES, f"put of {STREAMED_PUT_BYTES} bytes allocated {peak}"

    def test_large_object_round_trips_intact(self, store: BlobStore, prefix: str) -> None:
        key = f"{prefix}large"
        data = os.urandom(LARGE_OBJECT_BYTES)
        info = store.put(key, one_way(data), len(data), metadata={"kind": "large"})
        assert info.size == LARGE_OBJECT_BYTES
        assert sha256(read_blob(store, key)) == sha256(data)
        assert store.head(key).metadata == {"kind": "large"}

    # ------------------------------------------------------------------ content-addressed
    def test_content_addressed_put_of_same_bytes_uploads_once(
        self, store: BlobStore, upload_count: UploadCount
    ) -> None:
        data = os.urandom(200_000)
        first = store.put_content_addressed(io.BytesIO(data), len(data), content_type="image/png")
        second = store.put_content_addressed(one_way(data), len(data))
        digest = sha256(data)
        assert first.key == f"cas/sha256/{digest[:2]}/{digest}"
        assert (first.sha256, first.size, first.content_type) == (digest, len(data), "image/png")
        assert first.uploaded
        assert not second.uploaded
        assert second.key == first.key
        assert upload_count() == 1
        assert read_blob(store, first.key) == data
        assert store.head(first.key).content_type == "image/png"

    def test_content_addressed_put_spools_a_stream_that_cannot_seek(
        self, store: BlobStore, upload_count: UploadCount
    ) -> None:
        data = os.urandom(LARGE_OBJECT_BYTES)
        ref = store.put_content_addressed(one_way(data), len(data))
        assert ref.uploaded
        assert upload_count() == 1
        assert ref.sha256 == sha256(data)
        assert sha256(read_blob(store, ref.key)) == ref.sha256

    def test_content_addressed_put_reads_only_length_bytes(self, store: BlobStore) -> None:
        data = os.urandom(1000)
        stream = io.BytesIO(data + b"trailer")
        stream.seek(0)
        ref = store.put_content_addressed(stream, len(data))
        assert ref.sha256 == sha256(data)
        assert read_blob(store, ref.key) == data

    # ------------------------------------------------------------------ exists / delete / list
    def test_exists_and_idempotent_delete(self, store: BlobStore, prefix: str) -> None:
        key = f"{prefix}gone"
        assert not store.exists(key)
        store.put_bytes(key, b"x")
        assert store.exists(key)
        store.delete(key)
        assert not store.exists(key)
        store.delete(key)
        store.delete(f"{prefix}never-existed")
        with pytest.raises(BlobNotFound):
            read_blob(store, key)

    def test_list_with_metadata_and_prefix(self, store: BlobStore, prefix: str) -> None:
        store.put_bytes(f"{prefix}a/2", b"22", metadata={"n": "2"})
        store.put_bytes(f"{prefix}a/1", b"1", metadata={"n": "1"}, content_type="text/plain")
        store.put_bytes(f"{prefix}ab", b"333", metadata={"n": "3"})
        store.put_bytes(f"{prefix}b/1", b"4444")

        listed = list(store.list(f"{prefix}a/"))
        assert [i.key for i in listed] == [f"{prefix}a/1", f"{prefix}a/2"]
        assert [(i.size, i.metadata) for i in listed] == [(1, {"n": "1"}), (2, {"n": "2"})]
        assert listed[0].content_type == "text/plain"
        # A prefix is a plain string prefix, not a directory.
        assert [i.key for i in store.list(f"{prefix}a")] == [
            f"{prefix}a/1",
            f"{prefix}a/2",
            f"{prefix}ab",
        ]
        assert [i.key for i in store.list(prefix)] == [
            f"{prefix}a/1",
            f"{prefix}a/2",
            f"{prefix}ab",
            f"{prefix}b/1",
        ]
        assert list(store.list(f"{prefix}nothing")) == []
        store.delete(f"{prefix}a/1")
        assert [i.key for i in store.list(f"{prefix}a/")] == [f"{prefix}a/2"]

    # ------------------------------------------------------------------ metadata
    def test_set_metadata_merges_and_keeps_content(self, store: BlobStore, prefix: str) -> None:
        key = f"{prefix}stamped"
        data = os.urandom(50_000)
        store.put_bytes(key, data, metadata={"a": "1", "b": "2"}, content_type="text/csv")
        updated = store.set_metadata(key, {"b": "3", "offset": "1234"})
        assert updated.metadata == {"a": "1", "b": "3", "offset": "1234"}
        info = store.head(key)
        assert info.metadata == {"a": "1", "b": "3", "offset": "1234"}
        assert info.content_type == "text/csv"
        assert info.size == len(data)
        assert read_blob(store, key) == data

    def test_set_metadata_of_missing_key_raises_not_found(
        self, store: BlobStore, prefix: str
    ) -> None:
        with pytest.raises(BlobNotFound):
            store.set_metadata(f"{prefix}missing", {"a": "1"})
        assert not store.exists(f"{prefix}missing")

    @pytest.mark.parametrize(
        ("metadata", "message"),
        [
            ({"Upper": "x"}, "name 'Upper'"),
            ({"key with space": "x"}, "name 'key with space'"),
            ({"k": "caf\u00e9"}, "value 'caf\u00e9'"),
            ({"k": " padded"}, "value ' padded'"),
            ({"k": "line\nbreak"}, "value"),
            ({"k": "x" * 3000}, "2048-byte limit"),
        ],
    )
    def test_metadata_that_would_not_survive_is_refused(
        self, store: BlobStore, prefix: str, metadata: dict[str, str], message: str
    ) -> None:
        key = f"{prefix}meta"
        with pytest.raises(InvalidBlobMetadata, match=message):
            store.put_bytes(key, b"x", metadata=metadata)
        assert not store.exists(key)
        store.put_bytes(key, b"x")
        with pytest.raises(InvalidBlobMetadata, match=message):
            store.set_metadata(key, metadata)

    # ------------------------------------------------------------------ errors
    def test_missing_key_raises_not_found(self, store: BlobStore, prefix: str) -> None:
        key = f"{prefix}missing"
        with pytest.raises(BlobNotFound, match="missing") as raised:
            read_blob(store, key)
        assert raised.value.key == key
        assert not raised.value.retriable
        with pytest.raises(BlobNotFound):
            store.head(key)
        with pytest.raises(BlobNotFound), store.get(key):
            pass

    @pytest.mark.parametrize("key", TRAVERSAL_KEYS)
    def test_keys_that_could_escape_are_refused(self, store: BlobStore, key: str) -> None:
        with pytest.raises(InvalidBlobKey, match="invalid blob key"):
            store.put_bytes(key, b"x")
        with pytest.raises(InvalidBlobKey):
            read_blob(store, key)
        with pytest.raises(InvalidBlobKey):
            store.head(key)
        with pytest.raises(InvalidBlobKey):
            store.delete(key)
        with pytest.raises(InvalidBlobKey):
            store.set_metadata(key, {"a": "1"})

    def test_traversal_message_names_the_cause(self, store: BlobStore) -> None:
        with pytest.raises(InvalidBlobKey, match=r"path traversal \('\.\.'\)"):
            store.put_bytes("a/../../etc/passwd", b"x")
        with pytest.raises(InvalidBlobKey, match="absolute"):
            store.put_bytes("/etc/passwd", b"x")
        with pytest.raises(InvalidBlobKey):
            list(store.list("../"))
