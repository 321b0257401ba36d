"""The blob store contract on the local directory backend, plus what only it must prove:
files stay under the root, sidecars never collide with keys, writes are atomic."""

from __future__ import annotations

import io
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from blobstore import (
    BlobLengthMismatch,
    BlobStoreSettings,
    InvalidBlobKey,
    open_blob_store,
)
from blobstore.api import BlobStore
from blobstore.local import STALE_STAGING_AGE_S, LocalBlobStore
from tests.blobstore.reading import read_blob
from tests.contract.blobstore_contract import TRAVERSAL_KEYS, BlobStoreContract, UploadCount


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "blobs"


@pytest.fixture
def store(root: Path) -> Iterator[BlobStore]:
    with open_blob_store(BlobStoreSettings(backend="local", local_root=root)) as s:
        yield s


@pytest.fixture
def upload_count(store: BlobStore, monkeypatch: pytest.MonkeyPatch) -> UploadCount:
    """Counts puts that reach the disk (every local put writes the object file)."""
    count = 0
    put = store.put

    def counting_put(*args: object, **kwargs: object) -> object:
        nonlocal count
        count += 1
        return put(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "put", counting_put)
    return lambda: count


class TestLocalBlobStore(BlobStoreContract):
    pass


def files_under(directory: Path) -> set[Path]:
    return {p for p in directory.rglob("*") if p.is_file()}


@pytest.mark.parametrize("key", TRAVERSAL_KEYS)
def test_refused_keys_write_nothing_anywhere(store: BlobStore, tmp_path: Path, key: str) -> None:
    before = files_under(tmp_path)
    with pytest.raises(InvalidBlobKey):
        store.put_bytes(key, b"escaped?")
    assert files_under(tmp_path) == before


def test_keys_never_collide_with_sidecars_or_directories(store: BlobStore, root: Path) -> None:
    keys = ["x", "x/y", "x@meta.json", "x@blob", "x%40blob", "%", "caf\u00e9/\u00fc ber"]
    for i, key in enumerate(keys):
        store.put_bytes(key, key.encode(), metadata={"i": str(i)})
    for i, key in enumerate(keys):
        assert read_blob(store, key) == key.encode()
        assert store.head(key).metadata == {"i": str(i)}
    assert [info.key for info in store.list()] == sorted(keys, key=lambda k: k.encode())
    assert all(p.is_relative_to(root) for p in files_under(root))


def test_failed_put_leaves_no_staged_file(store: BlobStore, root: Path) -> None:
    with pytest.raises(BlobLengthMismatch):
        store.put("k", io.BytesIO(b"abc"), 10)
    assert list((root / "staging").iterdir()) == []
    assert files_under(root / "objects") == set()


def test_put_replaces_the_file_atomically(store: BlobStore) -> None:
    """A reader holding the old object keeps reading the old bytes: the file is replaced by a
    rename, never rewritten in place."""
    store.put_bytes("k", b"old" * 1000)
    with store.get("k") as reader:
        store.put_bytes("k", b"new" * 1000)
        assert reader.read() == b"old" * 1000
    assert read_blob(store, "k") == b"new" * 1000


def test_stale_staged_files_are_removed_on_open(root: Path) -> None:
    LocalBlobStore(root)
    stale = root / "staging" / "put-crashed"
    fresh = root / "staging" / "put-in-flight"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    old = time.time() - STALE_STAGING_AGE_S - 60
    os.utime(stale, (old, old))
    LocalBlobStore(root)
    assert not stale.exists()
    assert fresh.exists()


def test_overlong_segment_is_refused_clearly(store: BlobStore) -> None:
    with pytest.raises(InvalidBlobKey, match="too long for a file name"):
        store.put_bytes("a/" + "x" * 300, b"x")
