"""Errors raised by the blob store, all under :class:`runtime.errors.ScdError`.

Each says whether retrying the same call can help: a server that does not answer is worth
retrying, a wrong password or a missing object is not.
"""

from __future__ import annotations

from runtime.errors import PermanentError, ScdError


class BlobStoreError(ScdError):
    """A blob store operation failed."""


class BlobNotFound(BlobStoreError):
    """No object is stored under the key."""

    def __init__(self, key: str) -> None:
        super().__init__(f"no blob stored under key {key!r}")
        self.key = key


class BlobStoreUnavailable(BlobStoreError):
    """The store could not be reached or answered with a server-side failure."""

    retriable = True

    def __init__(self, endpoint: str, bucket: str, detail: str) -> None:
        super().__init__(f"blob store at {endpoint} (bucket {bucket!r}) is unavailable: {detail}")
        self.endpoint = endpoint
        self.bucket = bucket


class BlobStoreAccessDenied(BlobStoreError):
    """The store refused the credentials or the operation; fix the configuration, not a retry."""

    def __init__(self, endpoint: str, bucket: str, detail: str) -> None:
        super().__init__(f"blob store at {endpoint} (bucket {bucket!r}) denied access: {detail}")
        self.endpoint = endpoint
        self.bucket = bucket


class InvalidBlobKey(BlobStoreError, ValueError):
    """A key is empty, too long, or could escape its namespace (``..``, absolute path)."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"invalid blob key {key!r}: {reason}")
        self.key = key


class InvalidBlobMetadata(BlobStoreError, ValueError):
    """User metadata that the store could not keep exactly as given."""


class BlobLengthMismatch(BlobStoreError):
    """The stream given to a put ended before the announced length."""

    def __init__(self, expected: int, received: int) -> None:
        super().__init__(f"stream ended after {received} bytes, {expected} bytes were announced")
        self.expected = expected
        self.received = received


class MalformedReference(PermanentError):
    """The text is no Oak data store reference (``<hex identifier>:<hex hmac>``)."""


class ForgedReference(PermanentError):
    """The reference's HMAC does not match the configured reference key."""
