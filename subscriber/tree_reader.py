"""The current content tree of a subscriber's store, read without a JVM: the table's log and data
files through delta-rs (``deltalake``).

The current tree is the node versions that no scope of a later offset covers (the query
docs/content-store.md documents; subscriber.store.current_tree runs it in Spark). Here the
scope rows (a few once the store folded them) are read first and the node rows after, in
Arrow batches, only the files whose statistics may hold the paths asked for: a version is kept
unless a scope at its own path, or a deep one at a path above it, has a later offset.

``open_tree`` reads one version of the table; its ``iter_nodes`` yields the current nodes a
batch at a time (memory bounded by a batch and the scopes, whatever the tree's size), and
``nodes``/``node`` answer what content access (subscriber.content) asks of a store.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from blobstore.settings import BlobStoreSettings
from subscriber.errors import TreeReadError
from subscriber.store.rows import KIND_NODE, KIND_SCOPE, BinaryInfo, StoredNode

# The columns a node is read from (subscriber.store.rows.SCHEMA).
NODE_COLUMNS = ["path", "properties", "binaries", "offset", "pkg_id"]
SCOPE_COLUMNS = ["path", "offset", "info"]
# No scope, or none above a path: offsets start at 0.
NOT_COVERED = -1
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
REASON_CHARS = 500
# memoryview formats of integers by their width in bytes.
INT_FORMATS: dict[int, Literal["b", "h", "i", "q"]] = {1: "b", 2: "h", 4: "i", 8: "q"}


def _reason(exc: BaseException) -> str:
    """delta-rs' error in one line: its first two (what failed, and the request), without
    terminal colours and the server's whole answer that follows, bounded."""
    lines = ANSI_ESCAPE.sub("", str(exc)).splitlines()
    kept = [line.strip().lstrip("\u21b3").strip() for line in lines[:2]]
    return ": ".join(line for line in kept if line)[:REASON_CHARS]


def storage_options(location: str, blobs: BlobStoreSettings | None) -> dict[str, str]:
    """delta-rs' storage options for a store at ``location``: none for a local path; for
    ``s3a://`` the endpoint, region and keys of the S3 blob store (SCD_BLOB_*), as Spark's s3a
    settings take them (subscriber.spark), with path-style requests, plain HTTP when the
    endpoint is ``http://`` and the blob store's timeouts."""
    if not location.startswith(("s3a://", "s3://")):
        return {}
    if blobs is None or blobs.backend != "s3":
        raise TreeReadError(
            f"the store {location} is on S3 but no S3 blob store is configured to take the "
            "endpoint and credentials from (SCD_BLOB_BACKEND=s3, SCD_BLOB_ENDPOINT_URL, ...)"
        )
    options = {
        "aws_region": blobs.region,
        "aws_virtual_hosted_style_request": "false",
        "connect_timeout": f"{blobs.connect_timeout_s}s",
        "timeout": f"{blobs.read_timeout_s}s",
        "max_retries": str(blobs.max_attempts - 1),
    }
    if blobs.endpoint_url is not None:
        options["aws_endpoint_url"] = blobs.endpoint_url
        options["aws_allow_http"] = str(blobs.endpoint_url.startswith("http://")).lower()
    if blobs.access_key is not None and blobs.secret_key is not None:
        options["aws_access_key_id"] = blobs.access_key
        options["aws_secret_access_key"] = blobs.secret_key.get_secret_value()
    return options


def sql_literal(text: str) -> str:
    """A SQL string literal for DataFusion (standard SQL: quotes doubled, no backslash escapes)."""
    if "\x00" in text:
        raise TreeReadError(f"a path with a NUL character: {text!r}")
    return "'" + text.replace("'", "''") + "'"


def paths_predicate(root: str, *, deep: bool) -> str:
    """The node rows at ``root`` and (``deep``) below it, or its children, as a predicate on
    ``path`` that file statistics prune on (a range, not ``startswith``)."""
    node = f"kind = {sql_literal(KIND_NODE)}"
    if root == "/" and deep:
        return node
    at = f"path = {sql_literal(root)}"
    prefix = root.rstrip("/") + "/"
    below = f"path >= {sql_literal(prefix)} AND path < {sql_literal(root.rstrip('/') + '0')}"
    if not deep:
        below += f" AND parent = {sql_literal(root)}"
    return f"{node} AND ({at} OR ({below}))"


def places(path: str) -> list[str]:
    """The paths at and above ``path``, where a scope covering it can be (the query's
    ``places``: ``/a/b`` -> ``/``, ``/a``, ``/a/b``)."""
    parts = path.split("/")
    return ["/"] + ["/".join(parts[:i]) for i in range(2, len(parts) + 1)]


@dataclass(frozen=True)
class Scopes:
    """The highest scope offset per place: of any scope (covers the node at that path) and of
    deep ones (cover everything below too)."""

    at: dict[str, int]
    deep: dict[str, int]

    @classmethod
    def from_rows(cls, rows: list[dict[str, Any]]) -> Scopes:
        at: dict[str, int] = {}
        deep: dict[str, int] = {}
        for row in rows:
            path, offset = row["path"], row["offset"]
            at[path] = max(at.get(path, NOT_COVERED), offset)
            if row["info"] == "deep":
                deep[path] = max(deep.get(path, NOT_COVERED), offset)
        return cls(at, deep)

    def reaching(self, root: str) -> Scopes:
        """The scopes that can cover a node at or below ``root``: those at or below it, and the
        deep ones above it."""
        above = set(places(root)) - {root}

        def near(place: str) -> bool:
            return place == root or place.startswith(root.rstrip("/") + "/") or root == "/"

        return Scopes(
            {p: o for p, o in self.at.items() if near(p)},
            {p: o for p, o in self.deep.items() if near(p) or p in above},
        )


class CoverIndex:
    """The highest offset of a scope covering a path (memoized per parent path)."""

    def __init__(self, scopes: Scopes) -> None:
        self._scopes = scopes
        self._deep_at_or_above: dict[str, int] = {}

    def _deep(self, path: str) -> int:
        """The highest deep scope at ``path`` or above it."""
        known = self._deep_at_or_above.get(path)
        if known is not None:
            return known
        best = NOT_COVERED
        for place in places(path):
            cached = self._deep_at_or_above.get(place)
            if cached is not None:
                best = cached
                continue
            best = max(best, self._scopes.deep.get(place, NOT_COVERED))
            self._deep_at_or_above[place] = best
        return best

    def offset(self, path: str) -> int:
        """The highest offset of a scope covering the node at ``path``."""
        own = self._scopes.at.get(path, NOT_COVERED)
        if path == "/":
            return own
        return max(own, self._deep(path[: path.rfind("/")] or "/"))


def _from_buffer(data: Any, width: int, start: int, count: int) -> list[int]:
    """``count`` integers of ``width`` bytes from ``start`` on in an Arrow buffer."""
    view = memoryview(data)[: data.size // width * width].cast(INT_FORMATS[width])
    return list(view[start : start + count].tolist())


def _values(array: Any) -> list[Any]:
    """A flat Arrow array as Python values, read from its buffers: Arrow's own conversion
    makes a scalar object of every value first (microseconds each: most of the time a large
    subtree took). Arrays with nulls and other types take Arrow's way."""
    count, start = len(array), array.offset
    if array.null_count or count == 0:
        return list(array.to_pylist())
    buffers = array.buffers()
    if pa.types.is_string(array.type):  # int32 offsets into the data buffer
        at = _from_buffer(buffers[1], 4, start, count + 1)
        text = buffers[2].to_pybytes() if buffers[2] is not None else b""
        return [text[at[i] : at[i + 1]].decode() for i in range(count)]
    if pa.types.is_integer(array.type):
        return _from_buffer(buffers[1], array.type.bit_width // 8, start, count)
    if pa.types.is_boolean(array.type):  # one bit a value, least significant first
        bits = buffers[1].to_pybytes()
        return [bool(bits[i >> 3] >> (i & 7) & 1) for i in range(start, start + count)]
    return list(array.to_pylist())


def _lists(array: Any) -> list[list[Any]]:
    """A list array's lists (a null one empty)."""
    at = _values(array.offsets)
    values = _values(array.flatten())
    start = at[0]
    return [values[at[i] - start : at[i + 1] - start] for i in range(len(array))]


def _map_entries(column: Any) -> tuple[list[int], list[str], dict[str, list[Any]]]:
    """A map column's entries: each row's first entry (and the end), their keys and value
    fields as Python lists, converted a column at a time (Arrow's row-wise ``to_pylist`` of
    nested maps took 20 times longer). A null map has no entries."""
    offsets = _values(column.offsets)  # into the backing arrays, whatever the slice
    start, end = offsets[0], offsets[-1]
    items = column.items.slice(start, end - start)
    fields = {
        items.type.field(i).name: _lists(child) if pa.types.is_list(child.type) else _values(child)
        for i, child in enumerate(items.flatten())
    }
    keys = _values(column.keys.slice(start, end - start))
    return [o - start for o in offsets], keys, fields


def _nodes(batch: pa.RecordBatch, keep: list[bool] | None) -> Iterator[StoredNode]:
    """The batch's rows (those ``keep`` marks) as stored nodes."""
    paths = _values(batch.column("path"))
    offsets = _values(batch.column("offset"))
    pkg_ids = _values(batch.column("pkg_id"))
    p_at, p_keys, p = _map_entries(batch.column("properties"))
    b_at, b_keys, b = _map_entries(batch.column("binaries"))
    for i, path in enumerate(paths):
        if keep is not None and not keep[i]:
            continue
        properties = {
            p_keys[j]: (p["type"][j], p["multi"][j], p["values"][j])
            for j in range(p_at[i], p_at[i + 1])
        }
        binaries = {
            b_keys[j]: BinaryInfo(
                b["blob_key"][j], b["size"][j], b["sha256"][j], b["content_type"][j], b["data"][j]
            )
            for j in range(b_at[i], b_at[i + 1])
        }
        yield StoredNode(path, properties, binaries, offsets[i], pkg_ids[i])


class StoreTree:
    """The current tree of one version of a store's table (a NodeSource of
    subscriber.content)."""

    def __init__(self, table: DeltaTable, location: str) -> None:
        self.location = location
        self._table = table
        self.version: int = table.version()
        self._scopes: Scopes | None = None

    def _scan(self, columns: list[str], predicate: str) -> Iterator[pa.RecordBatch]:
        try:
            reader = pa.RecordBatchReader.from_stream(
                self._table.scan(columns=columns, predicate=predicate)
            )
            while True:
                try:
                    yield reader.read_next_batch()
                except StopIteration:
                    return
        except (DeltaError, OSError) as exc:
            raise TreeReadError(f"reading the store {self.location}: {_reason(exc)}") from exc

    def scopes(self) -> Scopes:
        if self._scopes is None:
            rows: list[dict[str, Any]] = []
            for batch in self._scan(SCOPE_COLUMNS, f"kind = {sql_literal(KIND_SCOPE)}"):
                rows.extend(batch.to_pylist())
            self._scopes = Scopes.from_rows(rows)
        return self._scopes

    def _current(self, root: str, predicate: str) -> Iterator[StoredNode]:
        """The current versions of the node rows ``predicate`` selects, all at or below
        ``root``."""
        scopes = self.scopes().reaching(root)
        cover = CoverIndex(scopes) if scopes.at or scopes.deep else None
        for batch in self._scan(NODE_COLUMNS, predicate):
            keep = None
            if cover is not None:
                paths = _values(batch.column("path"))
                offsets = _values(batch.column("offset"))
                keep = [cover.offset(p) <= o for p, o in zip(paths, offsets, strict=True)]
            yield from _nodes(batch, keep)

    def iter_nodes(self, root: str = "/", *, deep: bool = True) -> Iterator[StoredNode]:
        """The current nodes at and below ``root`` (``deep``), or ``root`` and its children, in
        no particular order."""
        return self._current(root, paths_predicate(root, deep=deep))

    def nodes(self, root: str = "/", *, deep: bool = True) -> list[StoredNode]:
        """As ``iter_nodes``, in path order."""
        return sorted(self.iter_nodes(root, deep=deep), key=lambda n: n.path)

    def node(self, path: str) -> StoredNode | None:
        predicate = f"kind = {sql_literal(KIND_NODE)} AND path = {sql_literal(path)}"
        return next(self._current(path, predicate), None)


def open_tree(
    location: str, options: Mapping[str, str] | None = None, *, version: int | None = None
) -> StoreTree:
    """The current tree of the store at ``location`` (a local path or ``s3a://``), at its
    latest version or at ``version``; ``options``: delta-rs storage options
    (``storage_options``)."""
    try:
        table = DeltaTable(location, version=version, storage_options=dict(options or {}))
    except TableNotFoundError as exc:
        raise TreeReadError(f"no content store at {location}") from exc
    except (DeltaError, OSError) as exc:
        raise TreeReadError(f"opening the store {location}: {_reason(exc)}") from exc
    return StoreTree(table, location)
