"""Open the blob store the settings describe."""

from __future__ import annotations

from blobstore.api import BlobStore
from blobstore.local import LocalBlobStore
from blobstore.settings import BlobStoreSettings


def open_blob_store(settings: BlobStoreSettings | None = None) -> BlobStore:
    """Build the configured backend (settings default to the ``SCD_BLOB_*`` environment).

    An S3 store with ``create_bucket`` creates its bucket now, so bad credentials or an
    unreachable server surface here rather than on the first upload.
    """
    settings = settings if settings is not None else BlobStoreSettings()
    if settings.backend == "local":
        assert settings.local_root is not None  # enforced by BlobStoreSettings
        return LocalBlobStore(settings.local_root)
    # Imported here: boto3 alone costs a command line tool on a local store ~0.4 s.
    from blobstore.s3 import S3BlobStore

    store = S3BlobStore(settings)
    if settings.create_bucket:
        store.ensure_bucket()
    return store
