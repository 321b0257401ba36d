"""Reading caller streams in bounded chunks, exactly as many bytes as announced."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import BinaryIO

from blobstore.errors import BlobLengthMismatch

# Unit of every copy loop: large enough that per-call overhead is negligible next to disk or
# network time, small enough that a put never holds more than this much of a stream at once.
COPY_CHUNK_BYTES = 1024 * 1024


class ExactLengthReader(io.RawIOBase):
    """Reads exactly ``length`` bytes of ``stream`` from its current position.

    EOF comes after ``length`` bytes even if the stream holds more (they stay unread); a stream
    that ends earlier raises :class:`BlobLengthMismatch` instead of producing a short object.
    ``read(n)`` returns ``n`` bytes unless at the end, even when the underlying stream returns
    short reads (pipes, sockets) - upload code uses a short read to detect the end.
    """

    def __init__(self, stream: BinaryIO, length: int) -> None:
        super().__init__()
        if length < 0:
            raise ValueError(f"length must be >= 0, got {length}")
        self._stream = stream
        self._length = length
        self._consumed = 0

    @property
    def consumed(self) -> int:
        return self._consumed

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        wanted = min(len(view), self._length - self._consumed)
        filled = 0
        while filled < wanted:
            chunk = self._stream.read(wanted - filled)
            if not chunk:
                raise BlobLengthMismatch(self._length, self._consumed + filled)
            view[filled : filled + len(chunk)] = chunk
            filled += len(chunk)
        self._consumed += filled
        return filled

    def read(self, size: int | None = -1) -> bytes:
        remaining = self._length - self._consumed
        if size is None or size < 0 or size > remaining:
            size = remaining
        buffer = bytearray(size)
        filled = self.readinto(buffer)
        del buffer[filled:]
        return bytes(buffer)


def copy_exact(source: BinaryIO, length: int, *sinks: Callable[[bytes], object]) -> None:
    """Feed exactly ``length`` bytes of ``source`` to every sink (a write, a hash update)."""
    reader = ExactLengthReader(source, length)
    while chunk := reader.read(COPY_CHUNK_BYTES):
        for sink in sinks:
            sink(chunk)
