"""Content access on a subscriber's store: list a subtree, read a node, stream a binary, export
a subtree to a directory.

Binaries stay references into the shared blob store (binary-less import); reading one streams
it from the blob store, or from the inline bytes stored in the row, and verifies its size and
sha256 when the reference carries them: the last byte is only handed out once both match.

Export layout (the mirror of the publisher's directory content source, so that a publisher
reading the exported directory would distribute the same nodes again). Node ``/a/b`` is
``<target>/a/b``:

* a file node (``jcr:primaryType`` = ``nt:file`` with a binary ``jcr:data``) becomes a file
  holding exactly the bytes of ``jcr:data``, its modification time set from
  ``jcr:lastModified`` when that is a date;
* a folder node (``nt:folder``) and any other node become a directory;
* properties that the file or directory itself cannot carry go to a sidecar
  ``<name>.props.json`` beside it: for a file every property except ``jcr:primaryType``,
  ``jcr:data``, a date ``jcr:lastModified`` and a ``jcr:mimeType`` equal to the type guessed from
  the file name; for a folder every property except ``jcr:primaryType``; for any other node every
  property. No sidecar is written when nothing is left.

A sidecar is a JSON object ``{name: value}`` in the publisher's request value form: strings,
longs, doubles and booleans as plain JSON, a multi-value as a list, a date as
``{"type": "date", "value": "<ISO-8601>"}`` and a binary as
``{"type": "binary", "base64": "...", "contentType": "..."}``. The root node ``/`` has no sidecar
(the directory source reads none for it), and a node without ``jcr:primaryType`` comes back as a
folder. Export writes every file to a temporary name and renames it, so a reader never sees a
partial file; files already in the target that the tree does not hold are left alone.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import io
import json
import logging
import mimetypes
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Literal, Protocol

from blobstore.api import BlobStore
from blobstore.errors import BlobNotFound
from blobstore.metadata import DEFAULT_CONTENT_TYPE
from journal.errors import ScdError
from journal.wire.package import FILE_DATA, FILE_TYPE, FOLDER_TYPE, LAST_MODIFIED, NODE_TYPE
from subscriber.rows import BinaryInfo, StoredNode

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

log = logging.getLogger(__name__)

# Property sidecar beside an exported file or directory. Same suffix as the publisher's
# directory content source reads (publisher.content_source.SIDECAR_SUFFIX, which the subscriber
# may not import), so an exported tree can be published again unchanged.
SIDECAR_SUFFIX = ".props.json"
# The content type property the directory source sets on file nodes from the file name.
MIME_PROPERTY = "jcr:mimeType"
# Copy buffer for binaries: large enough that a multi-MiB blob takes few system calls, small
# enough that many concurrent reads stay cheap in memory.
COPY_CHUNK_BYTES = 1024 * 1024
# Mode of exported files and sidecars: what a plain copy gets under the usual 022 umask, so a
# web server or another user can read the export (temporary files start as 0600).
EXPORTED_FILE_MODE = 0o644
# Name given to binaries stored inline in the row in error messages (they have no blob key).
INLINE = "<inline>"

JsonValue = Any  # what json.dumps accepts; JSON is recursive and mypy cannot say it better

Progress = Callable[[int, int], None]  # (nodes done, nodes in total)


class ContentError(ScdError):
    """Reading or exporting the content store's tree failed."""


class NodeNotFound(ContentError):
    def __init__(self, path: str) -> None:
        super().__init__(f"no node at {path!r} in the content store")
        self.path = path


class PropertyNotFound(ContentError):
    def __init__(self, path: str, prop: str) -> None:
        super().__init__(f"node {path!r} has no binary property {prop!r}")
        self.path = path
        self.prop = prop


class BinaryMissing(ContentError):
    """The blob a binary property refers to is not in the blob store."""

    def __init__(self, path: str, prop: str, blob_key: str) -> None:
        super().__init__(
            f"binary {prop!r} of node {path!r}: blob {blob_key!r} is missing from the blob store"
        )
        self.path = path
        self.prop = prop
        self.blob_key = blob_key


class BinaryUnreachable(ContentError):
    """A binary is a blob-store reference but no blob store is configured (SCD_BLOB_*)."""

    def __init__(self, path: str, prop: str, blob_key: str) -> None:
        super().__init__(
            f"{path}: property {prop} is stored in the blob store as {blob_key}, but no blob "
            "store is configured (set SCD_BLOB_*)"
        )


class BinaryCorrupt(ContentError):
    """A binary's bytes do not match the size or sha256 its reference records."""

    def __init__(
        self, path: str, prop: str, blob_key: str, what: str, expected: object, actual: object
    ) -> None:
        super().__init__(
            f"binary {prop!r} of node {path!r} (blob {blob_key}): {what} mismatch, "
            f"expected {expected}, got {actual}"
        )
        self.path = path
        self.prop = prop
        self.blob_key = blob_key
        self.what = what
        self.expected = expected
        self.actual = actual


class ExportError(ContentError):
    """The tree cannot be written to the target directory as it is."""


class UnsafeExportPath(ExportError):
    """A node path that would land outside the target directory."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"refusing to export node {path!r}: {reason}")
        self.path = path


class NodeSource(Protocol):
    """What content access needs from a store (subscriber.delta_store.DeltaStore has it)."""

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
def _open_info(
    blobs: BlobStore | None, path: str, prop: str, info: BinaryInfo
) -> Iterator[BinaryIO]:
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
    store: NodeSource, blobs: BlobStore | None, path: str, prop: str = FILE_DATA
) -> Iterator[BinaryIO]:
    """Stream a binary property; a short, long or altered blob raises BinaryCorrupt on read."""
    node = store.node(path)
    if node is None:
        raise NodeNotFound(path)
    info = node.binaries.get(prop)
    if info is None:
        raise PropertyNotFound(path, prop)
    with _open_info(blobs, path, prop, info) as stream:
        yield stream


# ---------------------------------------------------------------------------- export plan

NodeKind = Literal["file", "directory"]


@dataclass(frozen=True)
class ExportItem:
    """Where one node goes and what its sidecar holds (binaries still to be read)."""

    node: StoredNode
    kind: NodeKind
    target: Path
    sidecar_properties: dict[str, tuple[str, bool, list[str]]]
    sidecar_binaries: list[str]
    mtime_ns: int | None  # file modification time from jcr:lastModified

    @property
    def sidecar(self) -> Path | None:
        if self.node.path == "/" or not (self.sidecar_properties or self.sidecar_binaries):
            return None
        return self.target.with_name(self.target.name + SIDECAR_SUFFIX)


def target_path(target_dir: Path, path: str) -> Path:
    """The file system path of node ``path`` under ``target_dir``; refuses any escape."""
    if not path.startswith("/"):
        raise UnsafeExportPath(path, "not an absolute node path")
    if "\x00" in path:
        raise UnsafeExportPath(path, "contains a NUL character")
    if path == "/":
        return target_dir
    segments = path[1:].split("/")
    for segment in segments:
        if segment in ("", ".", ".."):
            raise UnsafeExportPath(path, "empty, '.' or '..' segment")
        if os.sep in segment or (os.altsep is not None and os.altsep in segment):
            raise UnsafeExportPath(path, "a segment contains a path separator")
        if segment.endswith(SIDECAR_SUFFIX):
            raise ExportError(
                f"cannot export node {path!r}: its name ends with {SIDECAR_SUFFIX!r}, "
                "the suffix of property sidecars"
            )
    return target_dir.joinpath(*segments)


def guessed_content_type(name: str) -> str:
    """The content type the directory source gives a file of this name."""
    return mimetypes.guess_type(name)[0] or DEFAULT_CONTENT_TYPE


def _date_ns(text: str) -> int | None:
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    micros = (moment - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)
    return int(micros) * 1000


def _is_file(node: StoredNode) -> bool:
    return node_type(node) == FILE_TYPE and FILE_DATA in node.binaries


def plan_item(target_dir: Path, node: StoredNode) -> ExportItem:
    """Decide how one node is written (pure: reads nothing but the node)."""
    target = target_path(target_dir, node.path)
    props = dict(node.properties)
    binaries = sorted(node.binaries)
    kind: NodeKind = "directory"
    mtime_ns = None
    if _is_file(node):
        kind = "file"
        props.pop(NODE_TYPE)
        binaries.remove(FILE_DATA)
        modified = props.get(LAST_MODIFIED)
        if modified is not None and modified[0] == "date" and not modified[1] and modified[2]:
            mtime_ns = _date_ns(modified[2][0])
            if mtime_ns is not None:
                del props[LAST_MODIFIED]
        if props.get(MIME_PROPERTY) == ("string", False, [guessed_content_type(target.name)]):
            del props[MIME_PROPERTY]
    elif node_type(node) == FOLDER_TYPE:
        props.pop(NODE_TYPE)
    return ExportItem(node, kind, target, props, binaries, mtime_ns)


def plan_export(target_dir: Path, nodes: list[StoredNode]) -> list[ExportItem]:
    """Every node's item, parents first; refuses escapes and children of file nodes."""
    items = [plan_item(target_dir, n) for n in sorted(nodes, key=lambda n: n.path)]
    files = {i.node.path for i in items if i.kind == "file"}
    for item in items:
        parent = item.node.path.rpartition("/")[0]
        while parent:
            if parent in files:
                raise ExportError(
                    f"cannot export node {item.node.path!r}: its ancestor {parent!r} is a file"
                )
            parent = parent.rpartition("/")[0]
    return items


def sidecar_document(item: ExportItem, blobs: BlobStore | None) -> dict[str, JsonValue]:
    """The sidecar's JSON object; binaries are read (and verified) into base64."""
    doc: dict[str, JsonValue] = {
        name: property_json(*prop) for name, prop in item.sidecar_properties.items()
    }
    for name in item.sidecar_binaries:
        info = item.node.binaries[name]
        with _open_info(blobs, item.node.path, name, info) as stream:
            data = stream.read()
        doc[name] = {
            "type": "binary",
            "base64": base64.b64encode(data).decode("ascii"),
            "contentType": info.content_type or DEFAULT_CONTENT_TYPE,
        }
    return dict(sorted(doc.items()))


# ---------------------------------------------------------------------------- export


@dataclass
class ExportReport:
    root: str
    target_dir: Path
    nodes: int = 0
    directories: int = 0
    files: int = 0
    sidecars: int = 0
    file_bytes: int = 0


class _Writer:
    """Writes under one target directory, never through a link that leads out of it."""

    def __init__(self, target_dir: Path) -> None:
        self.target = Path(os.path.abspath(target_dir))
        self.root = Path(os.path.realpath(target_dir))
        self._checked: set[Path] = set()

    def directory(self, path: Path) -> None:
        """Create ``path`` one level at a time, checking each level before entering it."""
        path = Path(os.path.abspath(path))
        if path in self._checked:
            return
        parts = path.relative_to(self.target).parts
        levels = [self.target.joinpath(*parts[:depth]) for depth in range(len(parts) + 1)]
        for current in levels:
            if current in self._checked:
                continue
            # Already there, or a link: either way checked below before anything goes inside.
            with suppress(FileExistsError):
                current.mkdir(parents=current == self.target)
            real = Path(os.path.realpath(current))
            if current != self.target and real != self.root and self.root not in real.parents:
                raise UnsafeExportPath(str(current), f"a symbolic link leads out of {self.root}")
            if not real.is_dir():
                raise ExportError(f"cannot create directory {current}: a file is in the way")
            self._checked.add(current)

    def file(self, dest: Path, write: Callable[[BinaryIO], int], mtime_ns: int | None) -> int:
        """Write through a temporary file renamed onto ``dest``; returns the bytes written."""
        self.directory(dest.parent)
        fd, name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
        tmp = Path(name)
        try:
            with os.fdopen(fd, "wb") as out:
                written = write(out)
            os.chmod(tmp, EXPORTED_FILE_MODE)
            if mtime_ns is not None:
                os.utime(tmp, ns=(mtime_ns, mtime_ns))
            try:
                os.replace(tmp, dest)
            except IsADirectoryError as exc:
                raise ExportError(f"cannot write file {dest}: a directory is in the way") from exc
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return written


def _write_bytes(data: bytes, out: BinaryIO) -> int:
    return out.write(data)


def _copy(source: BinaryIO, out: BinaryIO) -> int:
    total = 0
    while chunk := source.read(COPY_CHUNK_BYTES):
        out.write(chunk)
        total += len(chunk)
    return total


def export_tree(
    store: NodeSource,
    blobs: BlobStore | None,
    root: str,
    target_dir: Path,
    progress: Progress | None = None,
) -> ExportReport:
    """Reproduce the subtree at ``root`` under ``target_dir`` (node ``/a/b`` -> ``a/b``)."""
    nodes = store.nodes(root, deep=True)
    if not nodes and root != "/":
        raise NodeNotFound(root)
    target_dir = Path(target_dir)
    items = plan_export(target_dir, nodes)
    writer = _Writer(target_dir)
    writer.directory(target_dir)
    report = ExportReport(root, target_dir)
    if progress is not None:
        progress(0, len(items))
    for item in items:
        path = item.node.path
        if item.kind == "file":
            info = item.node.binaries[FILE_DATA]

            def write(out: BinaryIO, info: BinaryInfo = info, path: str = path) -> int:
                with _open_info(blobs, path, FILE_DATA, info) as source:
                    return _copy(source, out)

            report.file_bytes += writer.file(item.target, write, item.mtime_ns)
            report.files += 1
        else:
            writer.directory(item.target)
            report.directories += 1
        sidecar = item.sidecar
        if sidecar is not None:
            document = json.dumps(sidecar_document(item, blobs), indent=2, ensure_ascii=False)
            encoded = (document + "\n").encode("utf-8")
            writer.file(sidecar, partial(_write_bytes, encoded), None)
            report.sidecars += 1
        elif path == "/" and (item.sidecar_properties or item.sidecar_binaries):
            log.warning("export %s: properties of the root node / are not exported", root)
        report.nodes += 1
        if progress is not None:
            progress(report.nodes, len(items))
    log.info(
        "exported %s to %s: %d files (%d bytes), %d directories, %d sidecars",
        root,
        target_dir,
        report.files,
        report.file_bytes,
        report.directories,
        report.sidecars,
    )
    return report
