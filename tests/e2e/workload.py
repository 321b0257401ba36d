"""Distribute requests for the end-to-end tests, and the content they must leave on every
subscriber.

Requests go through the publisher's REST API with their nodes inline, over a small tree so that
later packages keep overwriting and deleting what earlier ones wrote. Every request carries its
sequence number in the package metadata (``e2e-seq``): reading the package topic back tells
which requests are on the log and at which offset, whatever the HTTP client saw (a request cut
off by a publisher crash, or one that timed out, may still have reached the log).

The model is independent of subscriber/store/changes.py; it applies packages by the content
semantics read literally, in log order:
* ADD, deep root r: r and everything below it are removed, then the package's nodes are put;
* ADD, shallow root r: the node r is put (properties replaced), its children stay;
* DELETE, deep root r: r and its subtree are removed; shallow: the node r only.
Values are kept in the store's documented text form (long and double as decimal text, bool as
true/false, date as ISO-8601 UTC); binaries as (size, sha256, stored by reference?).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# /content, 3 sections, 3 pages each, 2 components per page: 31 paths.
ROOT = "/content"
SECTIONS = [f"{ROOT}/s{i}" for i in range(3)]
PAGES = [f"{s}/{p}" for s in SECTIONS for p in ("a", "b", "c")]
COMPONENTS = [f"{p}/{c}" for p in PAGES for c in ("x", "y")]
ALL_PATHS = [ROOT, *SECTIONS, *PAGES, *COMPONENTS]
# The whole tree is rarely a target: a deep DELETE of it empties every store.
ROOT_WEIGHTS = {ROOT: 1, **dict.fromkeys(SECTIONS, 4), **dict.fromkeys(PAGES, 3)}
ROOT_WEIGHTS.update(dict.fromkeys(COMPONENTS, 1))
KINDS = {"add-deep": 35, "add-shallow": 30, "delete-deep": 15, "delete-shallow": 20}

# The publisher's defaults (publisher/settings.py): binaries above 16 KiB go to the blob store,
# packages above 800 KiB are spilled there.
BINARY_THRESHOLD_BYTES = 16 * 1024
INLINE_PACKAGE_LIMIT_BYTES = 800 * 1024
# A spilled package: binaries of exactly the threshold stay inline, random bytes do not
# compress, so this many of them take the package past the inline limit.
SPILL_BINARIES = INLINE_PACKAGE_LIMIT_BYTES // BINARY_THRESHOLD_BYTES + 2
# Shares of ADD packages made large enough to spill, of nodes with a small inline binary and
# of nodes with a binary above the threshold (stored once in the blob store, referenced).
SPILL_SHARE = 0.05
INLINE_BINARY_SHARE = 0.3
BLOB_BINARY_SHARE = 0.04
# A deep ADD carries its root with this probability and each other path of its subtree with
# the next one (what it does not carry is removed on the subscribers).
ROOT_CARRY_SHARE = 0.85
CARRY_SHARE = 0.6
SEQ_KEY = "e2e-seq"

Prop = tuple[str, bool, tuple[str, ...]]  # (type, multi, values in canonical text)
BinarySummary = tuple[int, str, bool]  # (size, sha256 hex, stored by reference)


def within(path: str, root: str) -> bool:
    return path == root or path.startswith(root + "/")


@dataclass(frozen=True)
class ExpectedNode:
    properties: dict[str, Prop]
    binaries: dict[str, BinarySummary]


@dataclass
class Request:
    """One POST /distribute body and what it must do to a subscriber's content."""

    seq: int
    action: str  # ADD or DELETE
    roots: list[tuple[str, bool]]  # (path, deep)
    nodes: dict[str, ExpectedNode] = field(default_factory=dict)
    node_specs: list[dict[str, Any]] = field(default_factory=list)
    spill: bool = False

    @property
    def needs_blob_store(self) -> bool:
        """Spilled, or carrying a binary above the threshold (put in the blob store)."""
        return self.spill or any(
            by_reference
            for node in self.nodes.values()
            for _, _, by_reference in node.binaries.values()
        )

    def body(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "paths": [p for p, deep in self.roots if not deep],
            "deepPaths": [p for p, deep in self.roots if deep],
            "nodes": self.node_specs,
            "metadata": {SEQ_KEY: str(self.seq)},
        }


def _date_text(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")


class Workload:
    """Deterministic random requests (given the seed), numbered from 0."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.requests: dict[int, Request] = {}

    def _binary(self, data: bytes) -> tuple[dict[str, Any], BinarySummary]:
        spec = {
            "type": "binary",
            "base64": base64.b64encode(data).decode(),
            "contentType": "application/octet-stream",
        }
        summary = (len(data), hashlib.sha256(data).hexdigest(), len(data) > BINARY_THRESHOLD_BYTES)
        return spec, summary

    def _node(self, path: str, seq: int, spill: bool) -> tuple[dict[str, Any], ExpectedNode]:
        rng = self.rng
        props: dict[str, Any] = {}
        expected: dict[str, Prop] = {}
        bins: dict[str, BinarySummary] = {}
        props["title"] = f"{path} by request {seq}"
        expected["title"] = ("string", False, (props["title"],))
        rev = rng.randrange(1_000_000)
        props["rev"] = rev
        expected["rev"] = ("long", False, (str(rev),))
        if rng.random() < 0.5:
            flag = rng.random() < 0.5
            props["flag"] = flag
            expected["flag"] = ("bool", False, ("true" if flag else "false",))
        if rng.random() < 0.4:
            score = rng.randrange(-400, 400) / 8 + 0.125  # exact in binary; never integral
            props["score"] = score
            expected["score"] = ("double", False, (repr(score),))
        if rng.random() < 0.3:
            tags = [f"t{rng.randrange(50)}" for _ in range(rng.randrange(0, 4))]
            props["tags"] = tags
            expected["tags"] = ("string", True, tuple(tags))
        if rng.random() < 0.2:
            ms = 1_700_000_000_000 + rng.randrange(10**10)
            props["when"] = {"type": "date", "value": ms}
            expected["when"] = ("date", False, (_date_text(ms),))
        if rng.random() < INLINE_BINARY_SHARE:
            props["data"], bins["data"] = self._binary(rng.randbytes(rng.randrange(0, 300)))
        if rng.random() < BLOB_BINARY_SHARE:
            size = rng.randrange(BINARY_THRESHOLD_BYTES + 1, 3 * BINARY_THRESHOLD_BYTES)
            props["file"], bins["file"] = self._binary(rng.randbytes(size))
        if spill:
            for i in range(SPILL_BINARIES):
                name = f"part{i:02d}"
                props[name], bins[name] = self._binary(rng.randbytes(BINARY_THRESHOLD_BYTES))
        return {"path": path, "properties": props}, ExpectedNode(expected, bins)

    def next(self, kind: str | None = None, *, spill: bool | None = None) -> Request:
        """The next request; ``kind`` (add-deep, add-shallow, delete-deep, delete-shallow) and
        ``spill`` are drawn at random unless given."""
        rng = self.rng
        seq = len(self.requests)
        if kind is None:
            kind = rng.choices(list(KINDS), list(KINDS.values()))[0]
        root = rng.choices(list(ROOT_WEIGHTS), list(ROOT_WEIGHTS.values()))[0]
        deep = kind.endswith("deep")
        roots = [(root, deep)]
        if kind == "add-deep" and rng.random() < 0.15:  # a second, disjoint deep root
            others = [p for p in PAGES if not within(p, root) and not within(root, p)]
            if others:
                roots.append((rng.choice(others), True))
        if spill is None:
            spill = kind.startswith("add") and rng.random() < SPILL_SHARE
        assert not spill or kind.startswith("add"), "only an ADD carries content to spill"
        request = Request(seq, "ADD" if kind.startswith("add") else "DELETE", roots, spill=spill)
        if kind == "add-deep":
            carried: list[str] = []
            for r, _ in roots:
                subtree = [
                    p
                    for p in ALL_PATHS
                    if within(p, r) and rng.random() < (ROOT_CARRY_SHARE if p == r else CARRY_SHARE)
                ]
                # A deep path without any node would be exported from a content source, which
                # this publisher does not have: carry at least the root.
                carried.extend(subtree or [r])
        elif kind == "add-shallow":
            carried = [root]
        else:
            carried = []
        for i, path in enumerate(carried):
            spec, expected = self._node(path, seq, spill and i == 0)
            request.node_specs.append(spec)
            request.nodes[path] = expected
        self.requests[seq] = request
        return request


@dataclass(frozen=True)
class ModelNode:
    node: ExpectedNode
    offset: int  # offset of the package that last wrote the node


class ContentModel:
    """The content tree after applying packages once each, in log order."""

    def __init__(self) -> None:
        self.tree: dict[str, ModelNode] = {}

    def _remove_subtree(self, root: str) -> None:
        for path in [p for p in self.tree if within(p, root)]:
            del self.tree[path]

    def apply(self, request: Request, offset: int) -> None:
        if request.action == "ADD":
            for root, deep in request.roots:
                if deep:
                    self._remove_subtree(root)
            self.tree.update({p: ModelNode(n, offset) for p, n in request.nodes.items()})
        else:
            for root, deep in request.roots:
                if deep:
                    self._remove_subtree(root)
                else:
                    self.tree.pop(root, None)

    @classmethod
    def of(cls, applied: Iterable[tuple[int, Request]]) -> ContentModel:
        model = cls()
        for offset, request in sorted(applied, key=lambda pair: pair[0]):
            model.apply(request, offset)
        return model


def stored_summary(node: Any) -> tuple[ExpectedNode, int]:
    """A subscriber.store.rows.StoredNode in the model's terms (and the offset that wrote it)."""
    props = {k: (t, multi, tuple(values)) for k, (t, multi, values) in node.properties.items()}
    bins: dict[str, BinarySummary] = {}
    for name, info in node.binaries.items():
        if info.blob_key is not None:
            bins[name] = (info.size, info.sha256 or "", True)
        else:
            data = info.data or b""
            bins[name] = (len(data), hashlib.sha256(data).hexdigest(), False)
    return ExpectedNode(props, bins), int(node.offset)


def content_differences(
    model: ContentModel, stored: Mapping[str, tuple[ExpectedNode, int]], limit: int = 5
) -> list[str]:
    """Human-readable differences between the model and a store's nodes (empty: equal)."""
    out: list[str] = []
    missing = sorted(set(model.tree) - set(stored))
    extra = sorted(set(stored) - set(model.tree))
    if missing:
        out.append(f"missing nodes: {missing[:limit]} ({len(missing)} in all)")
    if extra:
        out.append(f"unexpected nodes: {extra[:limit]} ({len(extra)} in all)")
    for path in sorted(set(model.tree) & set(stored)):
        want, got = model.tree[path], stored[path]
        if want.node != got[0]:
            out.append(f"{path}: expected {want.node}, found {got[0]}")
        elif want.offset != got[1]:
            out.append(f"{path}: written by offset {got[1]}, expected offset {want.offset}")
        if len(out) >= limit:
            break
    return out
