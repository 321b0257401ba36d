"""A FileVault package's Oak data store references turned into scd blob references.

FileVault's reader keeps a ``{BinaryRef}`` it did not write as the blob key
``filevault-ref/<reference>`` (journal.content.filevault.layout). With an Oak data store
configured (blobstore.oak, ``SCD_OAK_*``) each such binary is resolved when its package is
read, before the import sees it:

* a reference that is malformed, or whose HMAC does not match the configured reference key,
  fails its package for good (BadBinaryReference, a PermanentError: REMOVED_FAILED);
* a record that is not (yet) in the data store is a transient failure, PackageUnavailable,
  exactly as a package blob not replicated yet: the import retries it with back-off;
* a ``file`` layout record is copied into scd's blob store under its content key
  (``cas/sha256/...``, once: a blob already there is not copied again), its bytes checked
  against the identifier on the way; an ``s3`` layout record already is an object of scd's
  bucket and is referenced in place, its sha256 checked whenever it is read.

The binary then is an ordinary scd reference: key, size, sha256, content type.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from blobstore.api import BlobStore
from blobstore.content_addressed import content_key
from blobstore.errors import BlobNotFound, BlobStoreError
from blobstore.oak import OakDataStore, OakReference, file_path, s3_key
from journal.content.filevault.layout import FOREIGN_REF_KEY
from journal.content.package import BlobRef, ContentPackage, Value
from runtime.errors import PermanentError
from subscriber.errors import BadBinaryReference, CorruptPackage, PackageUnavailable

READ_CHUNK_BYTES = 1024 * 1024


def _refs(value: Value) -> Iterator[BlobRef]:
    if value.HasField("binary_value") and value.binary_value.HasField("ref"):
        yield value.binary_value.ref
    elif value.HasField("multi_value"):
        for item in value.multi_value.values:
            yield from _refs(item)


def resolve_references(
    package: ContentPackage, store: OakDataStore, blobs: BlobStore | None
) -> int:
    """Resolve every Oak reference of ``package`` in place; returns how many it resolved."""
    resolved = 0
    for node in package.nodes:
        for prop, value in node.properties.items():
            for ref in _refs(value):
                if not ref.key.startswith(FOREIGN_REF_KEY):
                    continue
                where = f"package {package.package_id}: node {node.path!r} property {prop!r}"
                _resolve(where, ref, store, blobs)
                resolved += 1
    return resolved


def _resolve(where: str, ref: BlobRef, store: OakDataStore, blobs: BlobStore | None) -> None:
    try:
        reference = store.reference(ref.key[len(FOREIGN_REF_KEY) :])
    except PermanentError as exc:
        raise BadBinaryReference(f"{where}: {exc}") from exc
    if blobs is None:
        raise PackageUnavailable(
            f"{where}: the Oak data store binary {reference.identifier} is copied into or read "
            "from scd's blob store, but this subscriber has no blob store configured"
        )
    try:
        if store.layout == "file":
            assert store.file_root is not None  # the settings require it
            key, size, sha256 = _copy_file_record(where, store.file_root, reference, blobs)
        else:
            key = s3_key(store.s3_prefix, reference.identifier)
            size = blobs.head(key).size
            sha256 = reference.identifier if reference.digest == "sha256" else ""
    except (FileNotFoundError, BlobNotFound) as exc:
        place = (
            f"no file {exc.filename}"
            if isinstance(exc, FileNotFoundError)
            else f"no object {exc.key!r} in scd's blob store"
        )
        raise PackageUnavailable(
            f"{where}: Oak data store record {reference.identifier} not found ({place}); "
            "retried: it may not be replicated yet"
        ) from exc
    except (BlobStoreError, OSError) as exc:
        raise PackageUnavailable(f"{where}: Oak data store record: {exc}") from exc
    ref.key, ref.size, ref.sha256 = key, size, sha256


def _copy_file_record(
    where: str, root: Path, reference: OakReference, blobs: BlobStore
) -> tuple[str, int, str]:
    """The record's bytes in scd's blob store: (content key, size, sha256)."""
    if reference.digest == "sha256":
        key = content_key(reference.identifier)
        try:
            return key, blobs.head(key).size, reference.identifier  # copied before
        except BlobNotFound:
            pass
    path = file_path(root, reference.identifier)
    with path.open("rb") as stream:  # FileNotFoundError: not there (yet)
        size = os.fstat(stream.fileno()).st_size
        sha256 = _check_digest(where, stream, reference)
        stream.seek(0)
        key = content_key(sha256)
        blobs.put(key, stream, size)
    return key, size, sha256


def _check_digest(where: str, stream: BinaryIO, reference: OakReference) -> str:
    """Reads ``stream`` to its end: its sha256, once its digest matched the identifier."""
    sha256 = hashlib.sha256()
    named = hashlib.new(reference.digest)
    while chunk := stream.read(READ_CHUNK_BYTES):
        sha256.update(chunk)
        named.update(chunk)
    if named.hexdigest() != reference.identifier:
        raise CorruptPackage(
            f"{where}: Oak data store record {reference.identifier} holds bytes of "
            f"{reference.digest} {named.hexdigest()}: the data store is damaged"
        )
    return sha256.hexdigest()
