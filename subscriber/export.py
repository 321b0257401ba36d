"""Export a subtree of a subscriber's store to a directory.

Layout (the mirror of the publisher's directory content source, so that a publisher reading
the exported directory would distribute the same nodes again). Node ``/a/b`` is
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
import json
import logging
import mimetypes
import os
import tempfile
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import BinaryIO, Literal

from blobstore.metadata import DEFAULT_CONTENT_TYPE
from journal.content.package import FILE_DATA, FILE_TYPE, FOLDER_TYPE, LAST_MODIFIED, NODE_TYPE
from subscriber.content import (
    COPY_CHUNK_BYTES,
    BlobSource,
    JsonValue,
    NodeSource,
    node_type,
    open_stored_binary,
    property_json,
)
from subscriber.errors import ExportError, NodeNotFound, UnsafeExportPath
from subscriber.store.rows import BinaryInfo, StoredNode

log = logging.getLogger(__name__)

# Property sidecar beside an exported file or directory. Same suffix as the publisher's
# directory content source reads (publisher.distribute.content_source.SIDECAR_SUFFIX, which the
# subscriber may not import), so an exported tree can be published again unchanged.
SIDECAR_SUFFIX = ".props.json"
# The content type property the directory source sets on file nodes from the file name.
MIME_PROPERTY = "jcr:mimeType"
# Mode of exported files and sidecars: what a plain copy gets under the usual 022 umask, so a
# web server or another user can read the export (temporary files start as 0600).
EXPORTED_FILE_MODE = 0o644
Progress = Callable[[int, int], None]  # (nodes done, nodes in total)


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


def sidecar_document(item: ExportItem, blobs: BlobSource | None) -> dict[str, JsonValue]:
    """The sidecar's JSON object; binaries are read (and verified) into base64."""
    doc: dict[str, JsonValue] = {
        name: property_json(*prop) for name, prop in item.sidecar_properties.items()
    }
    for name in item.sidecar_binaries:
        info = item.node.binaries[name]
        with open_stored_binary(blobs, item.node.path, name, info) as stream:
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
    blobs: BlobSource | None,
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
                with open_stored_binary(blobs, path, FILE_DATA, info) as source:
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
