"""Reading a whole blob back, for tests (the product streams blobs; it never needs them whole)."""

from __future__ import annotations

from blobstore.api import BlobStore


def read_blob(store: BlobStore, key: str) -> bytes:
    with store.get(key) as stream:
        return stream.read()
