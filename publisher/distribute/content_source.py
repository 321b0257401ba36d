"""The directory-tree content source: repository path ``/a/b`` is ``<root>/a/b``.

* a folder becomes a node ``{"jcr:primaryType": "nt:folder"}``;
* a file becomes ``{"jcr:primaryType": "nt:file", "jcr:data": <binary>, "jcr:mimeType": ...,
  "jcr:lastModified": <date>}``;
* a sidecar ``<name>.props.json`` beside a file or folder adds properties to its node (same JSON
  value forms as inline nodes); sidecars are never nodes themselves.

Symbolic links and special files are skipped (logged): a link could lead out of the root.
File names that are not UTF-8 are refused with a clear error rather than silently renamed.
"""

from __future__ import annotations

import json
import logging
import mimetypes
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from journal.content.package import (
    FILE_DATA,
    FILE_TYPE,
    FOLDER_TYPE,
    LAST_MODIFIED,
    NODE_TYPE,
    Node,
    Value,
)
from journal.content.rules import check_text, join
from publisher.distribute.request import PropertyValue
from publisher.distribute.values import BinarySink, ValueConverter, content_type_of, set_properties
from publisher.errors import ContentNotFound, InvalidRequest

log = logging.getLogger(__name__)

SIDECAR_SUFFIX = ".props.json"
MIME_PROPERTY = "jcr:mimeType"
# A sidecar is a small JSON document of properties; a larger one is a mistake, not metadata.
MAX_SIDECAR_BYTES = 1024 * 1024

_SIDECAR = TypeAdapter(dict[str, PropertyValue])


class DirectoryContentSource:
    """Exports nodes from a directory tree."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        if not self.root.is_dir():
            raise InvalidRequest(f"content root {root} is not a directory")

    def _fs_path(self, path: str) -> Path:
        """The file system path of a (validated) repository path, never outside the root."""
        target = self.root.joinpath(*[s for s in path.split("/") if s])
        # Validated paths have no '..', but a symbolic link on the way could still lead out.
        real = Path(os.path.realpath(target))
        if real != self.root and self.root not in real.parents:
            raise InvalidRequest(f"path {path!r} leads outside the content root")
        return target

    def export(self, path: str, deep: bool, sink: BinarySink) -> Iterator[Node]:
        """Nodes of ``path`` (and its subtree when ``deep``), parents before children."""
        target = self._fs_path(path)
        try:
            info = target.lstat()
        except FileNotFoundError:
            raise ContentNotFound(f"path {path!r} does not exist in the content source") from None
        if path != "/" and target.name.endswith(SIDECAR_SUFFIX):
            raise ContentNotFound(f"path {path!r} is a property sidecar, not a node")
        yield from self._walk(path, target, info, deep, sink)

    def _walk(
        self, path: str, target: Path, info: os.stat_result, deep: bool, sink: BinarySink
    ) -> Iterator[Node]:
        if stat.S_ISLNK(info.st_mode):
            raise InvalidRequest(f"path {path!r} is a symbolic link; links are not exported")
        if stat.S_ISREG(info.st_mode):
            yield self._file_node(path, target, info, sink)
            return
        if not stat.S_ISDIR(info.st_mode):
            raise InvalidRequest(f"path {path!r} is neither a file nor a folder")
        yield self._node(path, target, {NODE_TYPE: Value(string_value=FOLDER_TYPE)}, sink)
        if not deep:
            return
        with os.scandir(target) as entries:
            children = sorted(entries, key=lambda e: e.name)
        for entry in children:
            check_text(entry.name, f"file name in {path!r}:")
            if entry.name.endswith(SIDECAR_SUFFIX):
                continue
            child_path = join(path, entry.name)
            child_info = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(child_info.st_mode) or not (
                stat.S_ISREG(child_info.st_mode) or stat.S_ISDIR(child_info.st_mode)
            ):
                log.warning("content source: skipped %s (link or special file)", child_path)
                continue
            yield from self._walk(child_path, Path(entry.path), child_info, True, sink)

    def _file_node(self, path: str, target: Path, info: os.stat_result, sink: BinarySink) -> Node:
        mime = content_type_of(mimetypes.guess_type(target.name)[0], FILE_DATA)
        with target.open("rb") as stream:
            binary = sink(stream, info.st_size, mime)
        props = {
            NODE_TYPE: Value(string_value=FILE_TYPE),
            FILE_DATA: Value(binary_value=binary),
            MIME_PROPERTY: Value(string_value=mime),
            LAST_MODIFIED: Value(date_ms=info.st_mtime_ns // 1_000_000),
        }
        return self._node(path, target, props, sink)

    def _node(self, path: str, target: Path, props: dict[str, Value], sink: BinarySink) -> Node:
        node = Node(path=path)
        set_properties(node, props)
        if path != "/":
            sidecar = target.with_name(target.name + SIDECAR_SUFFIX)
            set_properties(node, self._sidecar(path, sidecar, sink))
        return node

    def _sidecar(self, path: str, sidecar: Path, sink: BinarySink) -> dict[str, Value]:
        try:
            info = sidecar.lstat()
        except FileNotFoundError:
            return {}
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SIDECAR_BYTES:
            raise InvalidRequest(
                f"property sidecar of {path!r} is not a regular file of at most "
                f"{MAX_SIDECAR_BYTES} bytes"
            )
        try:
            raw = json.loads(sidecar.read_bytes())
            props = _SIDECAR.validate_python(raw)
        except (ValueError, ValidationError) as exc:
            first = str(exc).splitlines()[0]
            raise InvalidRequest(f"property sidecar of {path!r} is not valid: {first}") from None
        return ValueConverter(sink).properties(props)
