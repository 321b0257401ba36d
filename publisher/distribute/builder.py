"""Build the binary-less content package of a distribute request.

* ADD: nodes given inline in the request, and nodes exported from the content source for every
  path the request does not cover itself; a deep path brings its subtree, a shallow one the
  node only.
* DELETE, TEST, INVALIDATE: the paths only (filter roots), no nodes.
* Binaries above the threshold are stored once in the blob store (content-addressed) and
  referenced; smaller ones stay inline.

The builder refuses a package above the maximum size as early as it can tell: the running total
of inline bytes stops an export of a huge tree before it is all in memory.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import BinaryIO

from blobstore import BlobStore
from journal.content import rules
from journal.content.filevault import encode_filevault
from journal.content.package import (
    FILEVAULT_PACKAGE_TYPE,
    PACKAGE_TYPE,
    Binary,
    BlobRef,
    ContentPackage,
    FilterRoot,
    Node,
    checksum,
    encode_package,
)
from publisher.distribute.content_source import DirectoryContentSource
from publisher.distribute.request import Action, DistributeRequest, PropertyValue
from publisher.distribute.values import UploadedPart, ValueConverter, set_properties
from publisher.errors import ContentNotFound, InvalidRequest, PackageTooLarge
from runtime.clock import now_ms

log = logging.getLogger(__name__)

# How many paths one request may name (the filter roots of its package). Every path travels in
# the PackageMessage and in every queue item; 10,000 paths of typical length stay far below the
# 1 MiB record limit.
MAX_PATHS = rules.DEFAULT_LIMITS.max_roots
# How many metadata entries a request may attach; metadata is for a few labels, not content.
MAX_METADATA_ENTRIES = 100


@dataclass
class BuiltPackage:
    """A serialized package and what the PackageMessage needs to describe it."""

    package_id: str
    action: Action
    paths: list[str]
    deep_paths: list[str]
    data: bytes
    checksum: str
    created_ms: int
    metadata: dict[str, str]
    user_id: str | None
    node_count: int = 0
    blob_refs: list[BlobRef] = field(default_factory=list)
    pkg_type: str = PACKAGE_TYPE


class _Sink:
    """Decides inline vs. blob store for each binary and keeps the running size."""

    def __init__(self, blobs: BlobStore, threshold: int, max_bytes: int) -> None:
        self.blobs = blobs
        self.threshold = threshold
        self.max_bytes = max_bytes
        self.inline_bytes = 0
        self.refs: list[BlobRef] = []

    def __call__(self, stream: BinaryIO, length: int, content_type: str) -> Binary:
        if length > self.threshold:
            ref = self.blobs.put_content_addressed(stream, length, content_type=content_type)
            self.refs.append(
                BlobRef(
                    key=ref.key, size=ref.size, sha256=ref.sha256, content_type=ref.content_type
                )
            )
            return Binary(ref=self.refs[-1], content_type=content_type)
        self.inline_bytes += length
        if self.inline_bytes > self.max_bytes:
            raise PackageTooLarge(self.inline_bytes, self.max_bytes)
        data = stream.read(length)
        if len(data) != length:
            raise InvalidRequest(f"binary ended after {len(data)} of {length} bytes")
        return Binary(inline=data, content_type=content_type)


def _node(path: str, properties: Mapping[str, PropertyValue], converter: ValueConverter) -> Node:
    """A node of the request, its properties converted and every content rule checked; an
    error names the node."""
    node = Node(path=path)
    try:
        set_properties(node, converter.properties(properties))
    except InvalidRequest as exc:
        raise InvalidRequest(f"node {path!r}: {exc}") from None
    except rules.ContentRuleError as exc:
        raise rules.ContentRuleError(exc.rule, exc.detail, path=path, prop=exc.prop) from None
    return rules.check_node(node)


class PackageBuilder:
    def __init__(
        self,
        blobs: BlobStore,
        content_source: DirectoryContentSource | None,
        *,
        binary_threshold_bytes: int,
        max_package_bytes: int,
        clock_ms: Callable[[], int] | None = None,
        filevault: bool = False,
    ) -> None:
        self.blobs = blobs
        self.content_source = content_source
        self.binary_threshold_bytes = binary_threshold_bytes
        self.max_package_bytes = max_package_bytes
        self.clock_ms = clock_ms or now_ms
        # FileVault packages (SCD_PUBLISHER_PACKAGE_TYPE=filevault) for Sling subscribers.
        self.pkg_type = FILEVAULT_PACKAGE_TYPE if filevault else PACKAGE_TYPE
        self.encode = encode_filevault if filevault else encode_package

    def build(
        self, request: DistributeRequest, parts: Mapping[str, UploadedPart] | None = None
    ) -> BuiltPackage:
        paths, deep = self._roots(request)
        metadata = self._metadata(request.metadata)
        if request.user_id is not None:
            rules.check_text(request.user_id, "userId")
        package = ContentPackage(
            package_id=uuid.uuid4().hex,
            req_type=request.action.req_type,  # type: ignore[arg-type]
            created_ms=self.clock_ms(),
            metadata=metadata,
        )
        package.roots.extend(FilterRoot(path=p, deep=p in deep) for p in paths)
        sink = _Sink(self.blobs, self.binary_threshold_bytes, self.max_package_bytes)
        if request.action is Action.ADD:
            package.nodes.extend(self._nodes(request, paths, deep, sink, parts or {}))
        elif request.nodes:
            raise InvalidRequest(f"{request.action} carries paths only; nodes go with ADD")
        elif parts:
            raise InvalidRequest(f"{request.action} carries paths only; uploads go with ADD")
        if len(package.nodes) > rules.DEFAULT_LIMITS.max_nodes:
            raise rules.ContentRuleError(
                rules.NODE_COUNT,
                f"{len(package.nodes)} nodes exceed {rules.DEFAULT_LIMITS.max_nodes}",
            )
        # Decoded size first: what a subscriber inflates the package to must fit its limit.
        if package.ByteSize() > self.max_package_bytes:
            raise PackageTooLarge(package.ByteSize(), self.max_package_bytes)
        data = self.encode(package)
        if len(data) > self.max_package_bytes:
            raise PackageTooLarge(len(data), self.max_package_bytes)
        return BuiltPackage(
            package_id=package.package_id,
            action=request.action,
            paths=paths,
            deep_paths=[p for p in paths if p in deep],
            data=data,
            checksum=checksum(data),
            created_ms=package.created_ms,
            metadata=metadata,
            user_id=request.user_id,
            node_count=len(package.nodes),
            blob_refs=sink.refs,
            pkg_type=self.pkg_type,
        )

    @staticmethod
    def _roots(request: DistributeRequest) -> tuple[list[str], set[str]]:
        if not request.paths and not request.deep_paths:
            raise InvalidRequest("no paths given: a distribute request needs at least one path")
        if len(request.paths) + len(request.deep_paths) > MAX_PATHS:
            raise InvalidRequest(f"more than {MAX_PATHS} paths in one request")
        deep = {rules.canonical_path(p, "deep path") for p in request.deep_paths}
        ordered: dict[str, None] = {}
        for raw in request.paths:
            ordered[rules.canonical_path(raw)] = None
        for raw in request.deep_paths:
            ordered[rules.canonical_path(raw, "deep path")] = None
        return list(ordered), deep

    @staticmethod
    def _metadata(metadata: Mapping[str, str]) -> dict[str, str]:
        if len(metadata) > MAX_METADATA_ENTRIES:
            raise InvalidRequest(f"more than {MAX_METADATA_ENTRIES} metadata entries")
        for key, value in metadata.items():
            rules.check_text(key, "metadata key")
            rules.check_text(value, f"metadata value of {key!r}")
            if not key:
                raise InvalidRequest("metadata keys must not be empty")
        return dict(metadata)

    def _nodes(
        self,
        request: DistributeRequest,
        paths: list[str],
        deep: set[str],
        sink: _Sink,
        parts: Mapping[str, UploadedPart],
    ) -> list[Node]:
        converter = ValueConverter(sink, parts)
        nodes: dict[str, Node] = {}
        covered: set[str] = set()
        for spec in request.nodes:
            path = rules.canonical_path(spec.path, "node path")
            if path in nodes:
                raise InvalidRequest(f"node {path!r} is given twice")
            roots = [r for r in paths if (rules.is_within(path, r) if r in deep else path == r)]
            if not roots:
                raise InvalidRequest(
                    f"node {path!r} is outside the distributed paths (a shallow path carries "
                    "only its own node, a deep path its subtree)"
                )
            covered.update(roots)
            nodes[path] = _node(path, spec.properties, converter)
        unused = set(parts) - converter.used_parts
        if unused:
            raise InvalidRequest(f"uploaded parts not referenced by any node: {sorted(unused)}")
        for root in paths:
            if root in covered:
                continue
            if self.content_source is None:
                raise ContentNotFound(
                    f"path {root!r}: the request carries no node for it and the publisher has "
                    "no content source configured"
                )
            for node in self.content_source.export(root, root in deep, sink):
                nodes.setdefault(node.path, rules.check_node(node))
        return sorted(nodes.values(), key=lambda n: n.path)
