"""Content access on a subscriber's store: list a subtree, read a node, stream a binary
(subscriber.export writes a subtree to a directory).

Binaries stay references into the shared blob store (binary-less import); reading one streams
it from the blob store, or from the inline bytes stored in the row, and verifies its size and
sha256 when the reference carries them: the last byte is only handed out once both match.
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

from blobstore.errors import BlobNotFound
from journal.content.package import FILE_DATA, NODE_TYPE
from subscriber.errors import (
    BinaryCorrupt,
    BinaryMissing,
    BinaryUnreachable,
    NodeNotFound,
    PropertyNotFound,
)
from subscriber.store.rows import BinaryInfo, StoredNode

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

log = logging.getLogger(__name__)

# Copy buffer for binaries: large enough that a multi-MiB blob takes few system calls, small
# enough that many concurrent reads stay cheap in memory.
COPY_CHUNK_BYTES = 1024 * 1024
# Name given to binaries stored inline in the row in error messages (they have no blob key).
INLINE = "<inline>"

JsonValue = Any  # what json.dumps accepts; JSON is recursive and mypy cannot say it better


class BlobSource(Protocol):
    """Where the bytes of a binary reference come from: a blob store, or a subscriber's read
    API (subscriber.reads.client); raises BlobNotFound for a key it does not hold."""

    def get(self, key: str) -> AbstractContextManager[BinaryIO]: ...


class NodeSource(Protocol):
    """What content access needs from a store (subscriber.store.delta.DeltaStore has it)."""

    def nodes(self, root: str = "/", *, deep: bool = True) -> list[StoredNode]: ...

    def node(self, path: str) -> StoredNode | None: ...


# ---------------------------------------------------------------------------- list and read


@dataclass(frozen=True)
class TreeEntry:
    """One node of a listing: its type and how much it holds."""

    path: str
    node_type: str | None  # jcr:primaryType, when set
    properties: int  # number of properties, binaries included
    binaries: int
    binary_bytes: int  # total size of its binaries


def node_type(node: StoredNode) -> str | None:
    prop = node.properties.get(NODE_TYPE)
    if prop is None or prop[1] or not prop[2]:
        return None
    return prop[2][0]


def list_tree(store: NodeSource, root: str = "/", deep: bool = True) -> list[TreeEntry]:
    """The nodes at and below ``root`` (children only when not ``deep``), in path order."""
    nodes = store.nodes(root, deep=deep)
    if not nodes and root != "/":
        raise NodeNotFound(root)
    return [
        TreeEntry(
            path=n.path,
            node_type=node_type(n),
            properties=len(n.properties) + len(n.binaries),
            binaries=len(n.binaries),
            binary_bytes=sum(b.size or 0 for b in n.binaries.values()),
        )
        for n in nodes
    ]


def _scalar_json(vtype: str, text: str) -> JsonValue:
    if vtype == "string":
        return text
    if vtype == "long":
        return int(text)
    if vtype == "double":
        return float(text)
    if vtype == "bool":
        return text == "true"
    return {"type": vtype, "value": text}  # date: ISO-8601 text, typed so it stays a date


def property_json(vtype: str, multi: bool, values: list[str]) -> JsonValue:
    """A stored property in the publisher's request value form (see the module docstring)."""
    items = [_scalar_json(vtype, v) for v in values]
    if multi:
        return items
    return items[0] if items else None


def binary_json(info: BinaryInfo) -> dict[str, JsonValue]:
    """Describes a binary without its bytes (read them with open_binary)."""
    return {
        "type": "binary",
        "size": info.size,
        "sha256": info.sha256,
        "contentType": info.content_type,
        "blobKey": info.blob_key,
        "inline": info.blob_key is None,
    }


def read_node(store: NodeSource, path: str) -> dict[str, JsonValue]:
    """A node as plain JSON: path, type, properties (binaries described, not included)."""
    node = store.node(path)
    if node is None:
        raise NodeNotFound(path)
    properties = {name: property_json(*p) for name, p in node.properties.items()}
    properties.update((name, binary_json(b)) for name, b in node.binaries.items())
    return {
        "path": node.path,
        "type": node_type(node),
        "properties": dict(sorted(properties.items())),
        "offset": node.offset,
        "packageId": node.pkg_id,
    }


# ---------------------------------------------------------------------------- binaries


class _VerifyingReader(io.RawIOBase):
    """Passes bytes through, checking size and sha256 before handing out the last byte."""

    def __init__(self, raw: BinaryIO, info: BinaryInfo, path: str, prop: str) -> None:
        super().__init__()
        self._raw = raw
        self._size = info.size if info.size is not None and info.size >= 0 else None
        self._sha256 = info.sha256 or None
        self._hash = hashlib.sha256()
        self._count = 0
        self._finished = False
        self._where = (path, prop, info.blob_key or INLINE)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        if self._finished:
            return 0
        view = memoryview(buffer).cast("B")
        want = len(view)
        if self._size is not None:
            want = min(want, self._size - self._count)
        data = self._raw.read(want) if want > 0 else b""
        if not data:
            self._finish()
            return 0
        self._hash.update(data)
        self._count += len(data)
        if self._size is not None and self._count == self._size:
            self._finish()
        view[: len(data)] = data
        return len(data)

    def _finish(self) -> None:
        self._finished = True
        if self._size is not None:
            actual = self._count
            if actual == self._size:
                actual += self._drain()  # bytes beyond the recorded size
            if actual != self._size:
                raise BinaryCorrupt(*self._where, "size", self._size, actual)
        digest = self._hash.hexdigest()
        if self._sha256 is not None and digest != self._sha256:
            raise BinaryCorrupt(*self._where, "sha256", self._sha256, digest)

    def _drain(self) -> int:
        extra = 0
        while chunk := self._raw.read(COPY_CHUNK_BYTES):
            extra += len(chunk)
        return extra


@contextmanager
def open_stored_binary(
    blobs: BlobSource | None, path: str, prop: str, info: BinaryInfo
) -> Iterator[BinaryIO]:
    """The bytes of the binary ``info`` of ``path``'s property ``prop``, verified as read."""
    with ExitStack() as stack:
        if info.blob_key is None:
            raw: BinaryIO = io.BytesIO(info.data or b"")
        elif blobs is None:
            raise BinaryUnreachable(path, prop, info.blob_key)
        else:
            try:
                raw = stack.enter_context(blobs.get(info.blob_key))
            except BlobNotFound as exc:
                raise BinaryMissing(path, prop, info.blob_key) from exc
        yield io.BufferedReader(_VerifyingReader(raw, info, path, prop), COPY_CHUNK_BYTES)


@contextmanager
def open_binary(
    store: NodeSource, blobs: BlobSource | None, path: str, prop: str = FILE_DATA
) -> Iterator[BinaryIO]:
    """Stream a binary property; a short, long or altered blob raises BinaryCorrupt on read."""
    node = store.node(path)
    if node is None:
        raise NodeNotFound(path)
    info = node.binaries.get(prop)
    if info is None:
        raise PropertyNotFound(path, prop)
    with open_stored_binary(blobs, path, prop, info) as stream:
        yield stream
