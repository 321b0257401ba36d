"""Shared blob store for large content packages and binaries: S3 or a local directory."""

from blobstore.api import BlobInfo, BlobRef, BlobStore
from blobstore.errors import (
    BlobLengthMismatch,
    BlobNotFound,
    BlobStoreAccessDenied,
    BlobStoreError,
    BlobStoreUnavailable,
    InvalidBlobKey,
    InvalidBlobMetadata,
)
from blobstore.factory import open_blob_store
from blobstore.settings import BlobStoreSettings

__all__ = [
    "BlobInfo",
    "BlobLengthMismatch",
    "BlobNotFound",
    "BlobRef",
    "BlobStore",
    "BlobStoreAccessDenied",
    "BlobStoreError",
    "BlobStoreSettings",
    "BlobStoreUnavailable",
    "InvalidBlobKey",
    "InvalidBlobMetadata",
    "open_blob_store",
]
