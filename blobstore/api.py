"""The blob store contract shared by every backend (S3, local directory).

Objects are byte strings under ``/``-separated keys with a content type and a small map of
user metadata. Reads and writes stream, so an object never has to fit in memory.
"""

from __future__ import annotations

import io
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import BinaryIO

from blobstore.content_addressed import content_key, hashed
from blobstore.errors import BlobNotFound
from blobstore.metadata import validate_content_type, validate_metadata

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BlobInfo:
    """What the store knows about one object."""

    key: str
    size: int
    last_modified: datetime
    content_type: str
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BlobRef:
    """A reference to content-addressed bytes, as embedded in content packages.

    ``uploaded`` tells the caller of :meth:`BlobStore.put_content_addressed` whether that call
    stored the bytes (False: an object with the same hash was already there). It is not part of
    the reference's identity and is False on references built from a package.
    """

    key: str
    size: int
    sha256: str
    content_type: str
    uploaded: bool = field(default=False, compare=False)


class BlobStore(ABC):
    """A bucket of objects. Implementations are safe to share between threads."""

    @abstractmethod
    def put(
        self,
        key: str,
        stream: BinaryIO,
        length: int,
        *,
        metadata: Mapping[str, str] | None = None,
        content_type: str | None = None,
    ) -> BlobInfo:
        """Store exactly ``length`` bytes read from ``stream``, replacing any object at ``key``.

        Bytes after ``length`` stay unread; a stream that ends early raises BlobLengthMismatch
        and leaves any previous object in place.
        """

    @abstractmethod
    def get(self, key: str) -> AbstractContextManager[BinaryIO]:
        """Open the object for a streaming read; raises BlobNotFound on entry if missing."""

    @abstractmethod
    def head(self, key: str) -> BlobInfo:
        """Describe the object; raises BlobNotFound if missing."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove the object; removing a missing object is not an error."""

    @abstractmethod
    def list(self, prefix: str = "") -> Iterator[BlobInfo]:
        """Objects whose key starts with ``prefix`` (plain string prefix), in key order."""

    @abstractmethod
    def set_metadata(self, key: str, metadata: Mapping[str, str]) -> BlobInfo:
        """Merge ``metadata`` into the object's metadata, keeping its bytes and content type."""

    def close(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing
        """Release connections; the store must not be used afterwards."""

    def put_bytes(
        self,
        key: str,
        data: bytes,
        *,
        metadata: Mapping[str, str] | None = None,
        content_type: str | None = None,
    ) -> BlobInfo:
        return self.put(
            key, io.BytesIO(data), len(data), metadata=metadata, content_type=content_type
        )

    def exists(self, key: str) -> bool:
        try:
            self.head(key)
        except BlobNotFound:
            return False
        return True

    def put_content_addressed(
        self,
        stream: BinaryIO,
        length: int,
        *,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> BlobRef:
        """Store the next ``length`` bytes of ``stream`` under a key derived from their sha256.

        The bytes are hashed first (a stream that cannot seek is spooled aside); when an object
        of that key and size already exists nothing is uploaded, and its metadata is kept.
        """
        content_type = validate_content_type(content_type)
        validate_metadata(metadata)
        with hashed(stream, length) as (body, sha256):
            key = content_key(sha256)
            try:
                existing = self.head(key)
            except BlobNotFound:
                existing = None
            if existing is not None and existing.size == length:
                logger.debug("content-addressed blob %s already stored, upload skipped", key)
                return BlobRef(key, length, sha256, content_type, uploaded=False)
            if existing is not None:
                logger.warning(
                    "content-addressed blob %s holds %d bytes instead of %d; storing it again",
                    key,
                    existing.size,
                    length,
                )
            self.put(key, body, length, metadata=metadata, content_type=content_type)
        return BlobRef(key, length, sha256, content_type, uploaded=True)

    def __enter__(self) -> BlobStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
