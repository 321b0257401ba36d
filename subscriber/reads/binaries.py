"""The bytes of a binary property over HTTP: a ``Range`` (RFC 9110, one range) and a stream
whose size and sha256 are checked as ``scd content cat`` checks them
(subscriber.content.open_stored_binary): the last byte of an answer goes out only once the
whole binary matched, so a binary that does not match is never served as good. A short one
(read whole before the answer starts) is answered 502; a longer one is cut off (the client
sees fewer bytes than Content-Length).

A range's answer reads the binary from its start to its end all the same (its sha256 covers
all of it); the bytes outside the range are read and dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from subscriber.errors import Unsatisfiable

# Bytes read and sent at a time: what a slow reader holds of the process's memory.
STREAM_CHUNK = 64 * 1024
_RANGE = re.compile(r"bytes=(\d{0,19})-(\d{0,19})")


@dataclass(frozen=True)
class ByteRange:
    start: int
    end: int  # inclusive

    @property
    def length(self) -> int:
        return self.end - self.start + 1


def byte_range(header: str | None, size: int) -> ByteRange | None:
    """The range a ``Range`` header asks of ``size`` bytes; None for the whole (no header, or
    one this server ignores: several ranges, another unit, a malformed one, as RFC 9110
    allows); Unsatisfiable when it starts past the end."""
    if header is None:
        return None
    match = _RANGE.fullmatch(header.strip())
    if match is None or match.group(1) == match.group(2) == "":
        return None
    first, last = match.group(1), match.group(2)
    if first == "":  # the last N bytes
        suffix = int(last)
        if suffix == 0:
            raise Unsatisfiable(f"bytes=-0 of {size} bytes")
        return ByteRange(max(0, size - suffix), size - 1) if size else None
    start = int(first)
    end = size - 1 if last == "" else min(int(last), size - 1)
    if last != "" and int(last) < start:
        return None  # invalid: ignored
    if start >= size:
        raise Unsatisfiable(f"bytes {start}- of {size} bytes")
    return ByteRange(start, end)


def read_chunks(stream: BinaryIO, wanted: ByteRange | None) -> Iterator[bytes]:
    """The bytes of ``wanted`` (all: None) of a verifying stream, each chunk handed out only
    once the next was read, the last once the stream ended verified (BinaryCorrupt raises
    from the stream before it)."""
    position = 0
    held = b""
    while chunk := stream.read(STREAM_CHUNK):
        begin, position = position, position + len(chunk)
        if wanted is not None:
            chunk = chunk[max(0, wanted.start - begin) : max(0, wanted.end + 1 - begin)]
        if not chunk:
            continue
        if held:
            yield held
        held = chunk
    if held:
        yield held
