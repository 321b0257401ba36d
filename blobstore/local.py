"""Blob store in a local directory: the embedded default, needing no server.

Layout under the root::

    objects/<segment>/.../<last segment>@blob        the bytes
    objects/<segment>/.../<last segment>@meta.json   content type and user metadata
    staging/                                          files being written

Each key segment is percent-encoded with ``@`` always escaped, so the ``@blob`` and
``@meta.json`` suffixes never occur in an encoded segment: a key never collides with another
key's sidecar or directory ("a", "a/b" and "a@meta.json" can all coexist). Files are written in
``staging/`` and renamed into place, so readers see a whole object or none.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, BinaryIO
from urllib.parse import quote, unquote

from blobstore.api import BlobInfo, BlobStore
from blobstore.errors import BlobNotFound, BlobStoreError, InvalidBlobKey
from blobstore.keys import validate_key, validate_prefix
from blobstore.metadata import DEFAULT_CONTENT_TYPE, validate_content_type, validate_metadata
from blobstore.streams import copy_exact

logger = logging.getLogger(__name__)

OBJECT_SUFFIX = "@blob"
SIDECAR_SUFFIX = "@meta.json"

# Most filesystems cap a file name at 255 bytes; an encoded segment plus the longer suffix must
# fit.
MAX_FILE_NAME_BYTES = 255

# Staged files older than this are leftovers of a crashed writer and are removed on open.
# Younger ones may belong to an upload still running in another process sharing the root.
STALE_STAGING_AGE_S = 24 * 3600


def _encode(segment: str) -> str:
    return quote(segment, safe="")


class LocalBlobStore(BlobStore):
    """Objects as files under ``root``; several processes may share one root."""

    def __init__(self, root: Path) -> None:
        self._root = root.resolve()
        self._objects = self._root / "objects"
        self._staging = self._root / "staging"
        with self._os_errors("open", str(self._root)):
            self._objects.mkdir(parents=True, exist_ok=True)
            self._staging.mkdir(parents=True, exist_ok=True)
            self._remove_stale_staging()

    @property
    def root(self) -> Path:
        return self._root

    def put(
        self,
        key: str,
        stream: BinaryIO,
        length: int,
        *,
        metadata: Mapping[str, str] | None = None,
        content_type: str | None = None,
    ) -> BlobInfo:
        data_path, sidecar_path = self._paths(key)
        user_metadata = validate_metadata(metadata)
        content_type = validate_content_type(content_type)
        with self._os_errors("put", key):
            data_path.parent.mkdir(parents=True, exist_ok=True)
            staged_data = self._stage(lambda f: copy_exact(stream, length, f.write))
            try:
                staged_sidecar = self._stage_sidecar(content_type, user_metadata)
            except BaseException:
                staged_data.unlink(missing_ok=True)
                raise
            # Sidecar first: a new key becomes visible (through its data file) complete with
            # its metadata. Overwriting a key briefly pairs the old bytes with new metadata.
            os.replace(staged_sidecar, sidecar_path)
            os.replace(staged_data, data_path)
            _fsync_directory(data_path.parent)
            stat = data_path.stat()
        logger.debug("stored %s (%d bytes) in %s", key, length, self._root)
        return BlobInfo(key, stat.st_size, _mtime(stat), content_type, user_metadata)

    def get(self, key: str) -> AbstractContextManager[BinaryIO]:
        data_path, _ = self._paths(key)
        return self._open(key, data_path)

    @contextmanager
    def _open(self, key: str, data_path: Path) -> Iterator[BinaryIO]:
        with self._os_errors("read", key):
            try:
                stream = data_path.open("rb")
            except FileNotFoundError:
                raise BlobNotFound(key) from None
        with stream:
            yield stream

    def head(self, key: str) -> BlobInfo:
        data_path, sidecar_path = self._paths(key)
        with self._os_errors("describe", key):
            try:
                stat = data_path.stat()
            except FileNotFoundError:
                raise BlobNotFound(key) from None
            content_type, metadata = self._read_sidecar(sidecar_path)
        return BlobInfo(key, stat.st_size, _mtime(stat), content_type, metadata)

    def delete(self, key: str) -> None:
        data_path, sidecar_path = self._paths(key)
        with self._os_errors("delete", key):
            # Data first, so the object never shows without its metadata.
            data_path.unlink(missing_ok=True)
            sidecar_path.unlink(missing_ok=True)

    def list(self, prefix: str = "") -> Iterator[BlobInfo]:
        validate_prefix(prefix)
        # Only the directory named by the prefix's complete segments can hold matches.
        directory, _, _ = prefix.rpartition("/")
        start = self._objects
        if directory:
            start = start.joinpath(*map(_encode, directory.split("/")))
        keys: list[str] = []
        with self._os_errors("list", prefix):
            for dirpath, _dirnames, filenames in os.walk(start):
                parents = [unquote(p) for p in Path(dirpath).relative_to(self._objects).parts]
                for name in filenames:
                    if name.endswith(OBJECT_SUFFIX):
                        last = unquote(name.removesuffix(OBJECT_SUFFIX))
                        key = "/".join([*parents, last])
                        if key.startswith(prefix):
                            keys.append(key)
        keys.sort(key=lambda k: k.encode("utf-8"))
        for key in keys:
            try:
                yield self.head(key)
            except BlobNotFound:
                logger.debug("blob %s deleted while listing %r", key, prefix)

    def set_metadata(self, key: str, metadata: Mapping[str, str]) -> BlobInfo:
        validate_metadata(metadata)
        _, sidecar_path = self._paths(key)
        info = self.head(key)
        merged = validate_metadata({**info.metadata, **metadata})
        with self._os_errors("set metadata of", key):
            os.replace(self._stage_sidecar(info.content_type, merged), sidecar_path)
        return BlobInfo(key, info.size, info.last_modified, info.content_type, merged)

    def _paths(self, key: str) -> tuple[Path, Path]:
        """Data and sidecar file of ``key``; refuses keys that could leave the root."""
        validate_key(key)
        segments = [_encode(segment) for segment in key.split("/")]
        for segment in segments:
            if len((segment + SIDECAR_SUFFIX).encode()) > MAX_FILE_NAME_BYTES:
                raise InvalidBlobKey(
                    key, f"a path segment is too long for a file name ({segment[:40]}...)"
                )
        directory = self._objects.joinpath(*segments[:-1])
        return (
            directory / (segments[-1] + OBJECT_SUFFIX),
            directory / (segments[-1] + SIDECAR_SUFFIX),
        )

    def _stage(self, write: Callable[[IO[bytes]], object]) -> Path:
        """Write a complete, synced file in the staging directory and return its path."""
        fd, name = tempfile.mkstemp(dir=self._staging, prefix="put-")
        path = Path(name)
        try:
            with os.fdopen(fd, "wb") as staged:
                write(staged)
                staged.flush()
                os.fsync(staged.fileno())
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return path

    def _stage_sidecar(self, content_type: str, metadata: dict[str, str]) -> Path:
        document = json.dumps({"content_type": content_type, "metadata": metadata})
        return self._stage(lambda f: f.write(document.encode("utf-8")))

    def _read_sidecar(self, sidecar_path: Path) -> tuple[str, dict[str, str]]:
        try:
            raw = sidecar_path.read_bytes()
        except FileNotFoundError:
            return DEFAULT_CONTENT_TYPE, {}
        try:
            document = json.loads(raw)
            return str(document["content_type"]), dict(document["metadata"])
        except (ValueError, KeyError, TypeError) as e:
            raise BlobStoreError(f"corrupt metadata file {sidecar_path}: {e!r}") from e

    def _remove_stale_staging(self) -> None:
        cutoff = time.time() - STALE_STAGING_AGE_S
        for leftover in self._staging.iterdir():
            try:
                if leftover.stat().st_mtime < cutoff:
                    leftover.unlink()
                    logger.info("removed stale staged file %s", leftover)
            except FileNotFoundError:
                continue  # another process cleaned it up first

    @contextmanager
    def _os_errors(self, operation: str, key: str) -> Iterator[None]:
        try:
            yield
        except OSError as e:
            raise BlobStoreError(
                f"local blob store {self._root}: cannot {operation} {key!r}: {e}"
            ) from e


def _mtime(stat: os.stat_result) -> datetime:
    return datetime.fromtimestamp(stat.st_mtime, tz=UTC)


def _fsync_directory(directory: Path) -> None:
    """Persist renames into ``directory`` (POSIX needs the directory itself synced)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
