"""Spill: packages above the inline limit live in the blob store, the message carries the key.

Package blobs sit under ``<prefix>/<package id>`` with metadata ``package-id`` and ``sha256``;
once the PackageMessage has an offset the blob is stamped with it (``offset``), which is what
the leader's cleanup (publisher/distribute/cleanup.py) compares with the package topic's earliest
offset. A blob whose send failed or whose stamp was lost stays unstamped; the cleanup stamps it
later, so no package blob is ever left unaccounted.
"""

from __future__ import annotations

import logging

from blobstore import BlobStore, BlobStoreError

log = logging.getLogger(__name__)

OFFSET_METADATA = "offset"
PACKAGE_ID_METADATA = "package-id"
SHA256_METADATA = "sha256"
PACKAGE_CONTENT_TYPE = "application/vnd.scd.content-package"


class PackageSpill:
    def __init__(
        self,
        blobs: BlobStore,
        prefix: str,
        inline_limit_bytes: int,
        *,
        stamp_blobs: BlobStore | None = None,
    ) -> None:
        """``stamp_blobs``: the store the stamps go through (default ``blobs``), say one with
        a shorter deadline: the package is on the log by then, a lost stamp is the cleanup's."""
        self.blobs = blobs
        self.stamp_blobs = stamp_blobs or blobs
        self.prefix = prefix.rstrip("/")
        self.inline_limit_bytes = inline_limit_bytes

    def needed(self, size: int) -> bool:
        return size > self.inline_limit_bytes

    def key_for(self, package_id: str) -> str:
        return f"{self.prefix}/{package_id}"

    @property
    def key_prefix(self) -> str:
        return f"{self.prefix}/"

    def store(self, package_id: str, data: bytes, sha256: str) -> str:
        key = self.key_for(package_id)
        self.blobs.put_bytes(
            key,
            data,
            metadata={PACKAGE_ID_METADATA: package_id, SHA256_METADATA: sha256},
            content_type=PACKAGE_CONTENT_TYPE,
        )
        return key

    def stamp(self, key: str, offset: int) -> bool:
        """Record the package's offset on its blob; False (logged) when the store refused."""
        try:
            self.stamp_blobs.set_metadata(key, {OFFSET_METADATA: str(offset)})
        except BlobStoreError as exc:
            log.warning(
                "could not stamp package blob %s with offset %d (the cleanup will): %s",
                key,
                offset,
                exc,
            )
            return False
        return True
