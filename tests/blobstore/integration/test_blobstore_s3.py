"""The blob store contract on a real S3 server, plus what only S3 must prove: multipart
uploads, clear errors on wrong credentials and on a missing bucket.

(Unreachable servers need no server: tests/blobstore/unit/test_blobstore_s3_unreachable.py.)"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from blobstore import (
    BlobStoreAccessDenied,
    BlobStoreError,
    BlobStoreSettings,
    open_blob_store,
)
from blobstore.s3 import S3BlobStore
from tests.blobstore.reading import read_blob
from tests.contract.blobstore_contract import (
    EVERY_CALL,
    LARGE_OBJECT_BYTES,
    MIB,
    BlobStoreContract,
    UploadCount,
    one_way,
)
from tests.services import S3Service

pytestmark = pytest.mark.integration

# The smallest part size S3 accepts, so LARGE_OBJECT_BYTES (5.5 MiB) goes up in two parts.
TEST_PART_BYTES = 5 * MIB


def settings_for(s3: S3Service, bucket: str, **overrides: Any) -> BlobStoreSettings:
    values: dict[str, Any] = {
        "backend": "s3",
        "endpoint_url": s3.endpoint_url,
        "region": s3.region,
        "access_key": s3.access_key,
        "secret_key": s3.secret_key,
        "bucket": bucket,
        "multipart_threshold_bytes": TEST_PART_BYTES,
        "multipart_chunk_bytes": TEST_PART_BYTES,
        **overrides,
    }
    return BlobStoreSettings(**values)


@pytest.fixture(scope="module")
def bucket(s3_service: S3Service) -> Iterator[str]:
    """A bucket of this module's own, emptied and removed afterwards."""
    name = f"scd-blob-test-{uuid.uuid4().hex[:12]}"
    store = open_blob_store(settings_for(s3_service, name, create_bucket=True))
    assert isinstance(store, S3BlobStore)
    yield name
    for info in store.list():
        store.delete(info.key)
    store.client.delete_bucket(Bucket=name)
    store.close()


@pytest.fixture(scope="module")
def store(s3_service: S3Service, bucket: str) -> Iterator[S3BlobStore]:
    store = open_blob_store(settings_for(s3_service, bucket))
    assert isinstance(store, S3BlobStore)
    yield store
    store.close()


@contextmanager
def count_requests(store: S3BlobStore, *operations: str) -> Iterator[Callable[[], int]]:
    """Count the HTTP requests of the given S3 operations the store's client sends."""
    count = 0

    def on_request(**_: Any) -> None:
        nonlocal count
        count += 1

    events = [f"before-call.s3.{operation}" for operation in operations]
    for event in events:
        store.client.meta.events.register(event, on_request)
    try:
        yield lambda: count
    finally:
        for event in events:
            store.client.meta.events.unregister(event, on_request)


@pytest.fixture
def upload_count(store: S3BlobStore) -> Iterator[UploadCount]:
    """Objects really sent to the server: single PUTs plus started multipart uploads."""
    with count_requests(store, "PutObject", "CreateMultipartUpload") as count:
        yield count


class TestS3BlobStore(BlobStoreContract):
    pass


def test_large_object_goes_up_in_parts_and_round_trips(store: S3BlobStore) -> None:
    data = os.urandom(LARGE_OBJECT_BYTES)
    key = f"multipart/{uuid.uuid4().hex}"
    with (
        count_requests(store, "UploadPart") as parts,
        count_requests(store, "PutObject") as single_puts,
    ):
        store.put(key, one_way(data), len(data))
    assert (parts(), single_puts()) == (2, 0)
    # An S3 multipart ETag is "<md5 of part md5s>-<number of parts>".
    etag = store.client.head_object(Bucket=store.bucket, Key=key)["ETag"]
    assert etag.strip('"').endswith("-2"), etag
    assert hashlib.sha256(read_blob(store, key)).digest() == hashlib.sha256(data).digest()


def test_object_below_threshold_goes_up_in_one_put(store: S3BlobStore) -> None:
    with (
        count_requests(store, "UploadPart") as parts,
        count_requests(store, "PutObject") as single_puts,
    ):
        store.put_bytes(f"small/{uuid.uuid4().hex}", os.urandom(TEST_PART_BYTES - 1))
    assert (parts(), single_puts()) == (0, 1)


@pytest.mark.parametrize("call", sorted(EVERY_CALL))
@pytest.mark.parametrize("wrong", ["secret_key", "access_key"])
def test_wrong_credentials_are_denied_naming_endpoint_and_bucket(
    s3_service: S3Service, bucket: str, store: S3BlobStore, wrong: str, call: str
) -> None:
    store.put_bytes("k", b"present")
    denied = open_blob_store(settings_for(s3_service, bucket, **{wrong: "wrong-value"}))
    with pytest.raises(BlobStoreAccessDenied) as raised:
        EVERY_CALL[call](denied)
    assert s3_service.endpoint_url in str(raised.value)
    assert bucket in str(raised.value)
    assert not raised.value.retriable


def test_missing_bucket_is_named_and_created_on_request(s3_service: S3Service) -> None:
    name = f"scd-blob-new-{uuid.uuid4().hex[:12]}"
    plain = open_blob_store(settings_for(s3_service, name))
    with pytest.raises(BlobStoreError, match=f"bucket '{name}' does not exist"):
        plain.put_bytes("k", b"x")
    with pytest.raises(BlobStoreError, match=f"bucket '{name}' does not exist"):
        plain.exists("k")
    creating = open_blob_store(settings_for(s3_service, name, create_bucket=True))
    open_blob_store(settings_for(s3_service, name, create_bucket=True))  # already there: fine
    creating.put_bytes("k", b"x")
    assert read_blob(plain, "k") == b"x"
    creating.delete("k")
    assert isinstance(creating, S3BlobStore)
    creating.client.delete_bucket(Bucket=name)
