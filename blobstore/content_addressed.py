"""Content-addressed keys: large binaries are stored once, under the sha256 of their bytes."""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO, cast

from blobstore.streams import copy_exact

CONTENT_ADDRESSED_ROOT = "cas/sha256"

# The key is only known once every byte is hashed, so a stream that cannot be rewound is
# copied aside first. Up to this size the copy stays in memory (typical images and documents
# hash without disk I/O); larger streams spill to a temporary file so memory stays bounded.
SPOOL_IN_MEMORY_BYTES = 4 * 1024 * 1024


def content_key(sha256_hex: str) -> str:
    """``cas/sha256/ab/abcdef...``: a two-character fan-out keeps directory listings short."""
    return f"{CONTENT_ADDRESSED_ROOT}/{sha256_hex[:2]}/{sha256_hex}"


def _is_seekable(stream: BinaryIO) -> bool:
    try:
        return bool(stream.seekable())
    except (AttributeError, OSError, ValueError):
        return False


@contextmanager
def hashed(stream: BinaryIO, length: int) -> Iterator[tuple[BinaryIO, str]]:
    """Hash the next ``length`` bytes of ``stream``.

    Yields a stream positioned at the start of those bytes (the same one rewound, or a spooled
    copy) and their sha256 in hex.
    """
    digest = hashlib.sha256()
    if _is_seekable(stream):
        start = stream.tell()
        copy_exact(stream, length, digest.update)
        stream.seek(start)
        yield stream, digest.hexdigest()
        return
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY_BYTES) as spool:
        copy_exact(stream, length, digest.update, spool.write)
        spool.seek(0)
        yield cast(BinaryIO, spool), digest.hexdigest()
