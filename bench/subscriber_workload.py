"""Workload of the subscriber import benchmark: content packages of about 5 KB, the state the
content tree must end in, and a checksum of that state that a Delta table can be compared to.

A package publishes one page: four nodes (the page, its ``jcr:content``, a text component and
an image component with a small inline binary), each a shallow filter root, with typed
properties (string, long, double, bool, date, multi-value, binary). Random text keeps the
zlib-compressed package near the target size. Three kinds of package:

* ``add``: a page that does not exist yet (new paths: the store's append path);
* ``update``: an ADD of an existing page with new property values (the store's replacing path);
* ``delete``: a DELETE of an existing page's four nodes.

Shallow roots make every package a set of node upserts or node deletes keyed by path, which is
exactly what a MERGE keyed by path expresses, so a generic Spark job can import the same stream
and must end with the same table.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import random
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from journal.content.package import (
    FILE_DATA,
    LAST_MODIFIED,
    NODE_TYPE,
    PACKAGE_TYPE,
    Binary,
    ContentPackage,
    FilterRoot,
    Node,
    checksum,
    encode_package,
)
from journal.wire import messages as m
from subscriber.maintenance.delta_table import quoted
from subscriber.store.current_tree import current_nodes_sql
from subscriber.store.rows import node_row

PUB_AGENT = "publish"
PUB_SLING_ID = "bench-publisher"
# Package mixes: share of (add, update, delete) packages. Updates and deletes pick a random
# page that exists at that point of the stream; the first packages are always adds.
MIXES: dict[str, tuple[float, float, float]] = {
    "mixed": (0.80, 0.15, 0.05),
    "inserts-only": (1.0, 0.0, 0.0),
    # A caught-up site: new pages and edits of existing ones (bench/subscriber_longrun.py).
    "pages-and-edits": (0.80, 0.20, 0.0),
}
# Target size of one encoded (compressed) package, and the raw bytes of its inline image.
DEFAULT_PACKAGE_BYTES = 5 * 1024
IMAGE_BYTES = 512
# Pages live under this many section folders (so paths share parents, as in a real site).
SECTIONS = 100
ROOT = "/content/bench"
# Path ranges a table is read back in for its checksum (each is held by the driver in turn).
DIGEST_PARTITIONS = 16
# Bytes of fixed structure (paths, property names, small values) in an encoded package, before
# its random text: subtracted from the target so the compressed total lands near it.
FIXED_OVERHEAD_BYTES = 1100


@dataclass(frozen=True)
class Planned:
    """One package of the stream: what it does and the encoded PackageMessage to send."""

    kind: str  # add / update / delete
    page: int
    package: ContentPackage
    payload: bytes  # encoded content package


@dataclass
class Workload:
    """A package stream and the content state it leads to."""

    packages: list[Planned] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        out = {"add": 0, "update": 0, "delete": 0}
        for p in self.packages:
            out[p.kind] += 1
        return out

    def mean_payload_bytes(self) -> float:
        return sum(len(p.payload) for p in self.packages) / max(1, len(self.packages))


def page_paths(page: int) -> list[str]:
    base = f"{ROOT}/s{page % SECTIONS:03d}/page-{page:06d}"
    return [
        base,
        f"{base}/jcr:content",
        f"{base}/jcr:content/par/text",
        f"{base}/jcr:content/par/image",
    ]


def _text(rng: random.Random, n_bytes: int) -> str:
    """Incompressible text: base64 of random bytes (compresses to ~3/4 of its length)."""
    return base64.b64encode(rng.randbytes(max(1, n_bytes * 3 // 4))).decode("ascii")


def page_nodes(page: int, version: int, rng: random.Random, size: int) -> list[Node]:
    page_path, content, text, image = page_paths(page)
    now_ms = 1_700_000_000_000 + page * 1000 + version
    # Compressed base64 keeps ~3/4 of its bytes: spread the rest of the budget over the texts.
    text_budget = max(256, (size - FIXED_OVERHEAD_BYTES - IMAGE_BYTES) * 4 // 3)
    page_node = Node(path=page_path)
    page_node.properties[NODE_TYPE].string_value = "cq:Page"
    page_node.properties["version"].long_value = version
    body = Node(path=content)
    body.properties[NODE_TYPE].string_value = "cq:PageContent"
    body.properties["jcr:title"].string_value = f"Page {page} v{version} {_text(rng, 24)}"
    body.properties["jcr:description"].string_value = _text(rng, text_budget // 4)
    body.properties[LAST_MODIFIED].date_ms = now_ms
    body.properties["hidden"].bool_value = version % 2 == 1
    body.properties["rank"].double_value = round(rng.random() * 100, 3)
    for tag in (f"tag:{rng.randrange(50)}", f"tag:{rng.randrange(50)}", "bench"):
        body.properties["cq:tags"].multi_value.values.add().string_value = tag
    text_node = Node(path=text)
    text_node.properties["sling:resourceType"].string_value = "site/components/text"
    text_node.properties["text"].string_value = _text(rng, text_budget * 3 // 4)
    text_node.properties["textIsRich"].bool_value = True
    image_node = Node(path=image)
    image_node.properties["sling:resourceType"].string_value = "site/components/image"
    image_node.properties["width"].long_value = 640 + version
    image_node.properties[FILE_DATA].binary_value.CopyFrom(
        Binary(inline=rng.randbytes(IMAGE_BYTES), content_type="image/png")
    )
    return [page_node, body, text_node, image_node]


def build(count: int, mix: str, *, seed: int = 1, size: int = DEFAULT_PACKAGE_BYTES) -> Workload:
    """A deterministic stream of ``count`` packages with the share of kinds ``MIXES[mix]``."""
    rng = random.Random(seed)
    add_share, update_share, _ = MIXES[mix]
    workload = Workload()
    live: list[int] = []  # pages that exist at this point of the stream
    live_index: dict[int, int] = {}
    versions: dict[int, int] = {}
    next_page = 0
    for i in range(count):
        draw = rng.random()
        if draw < add_share or len(live) < 10:
            kind, page = "add", next_page
            next_page += 1
        else:
            kind = "update" if draw < add_share + update_share else "delete"
            page = live[rng.randrange(len(live))]
        pkg_id = f"bench-{i:06d}-{uuid.UUID(int=rng.getrandbits(128)).hex[:12]}"
        paths = page_paths(page)
        if kind == "delete":
            package = ContentPackage(
                package_id=pkg_id,
                req_type=m.ReqType.DELETE,
                roots=[FilterRoot(path=p, deep=False) for p in paths],
            )
            slot = live_index.pop(page)
            last = live.pop()
            if last != page:
                live[slot] = last
                live_index[last] = slot
        else:
            version = versions.get(page, -1) + 1
            versions[page] = version
            package = ContentPackage(
                package_id=pkg_id,
                req_type=m.ReqType.ADD,
                roots=[FilterRoot(path=p, deep=False) for p in paths],
                nodes=page_nodes(page, version, rng, size),
            )
            if kind == "add":
                live_index[page] = len(live)
                live.append(page)
        workload.packages.append(Planned(kind, page, package, encode_package(package)))
    return workload


def package_message(
    planned: Planned, created_ms: int | None = None
) -> tuple[bytes, dict[str, str]]:
    """The PackageMessage record (value, headers) of a planned package, sent inline."""
    package = planned.package
    message = m.PackageMessage(
        pub_sling_id=PUB_SLING_ID,
        pub_agent_name=PUB_AGENT,
        pkg_id=package.package_id,
        req_type=package.req_type,
        pkg_type=PACKAGE_TYPE,
        pkg_length=len(planned.payload),
        pkg_binary=planned.payload,
        paths=[r.path for r in package.roots],
        deep_paths=[r.path for r in package.roots if r.deep],
        created_ms=created_ms if created_ms is not None else int(time.time() * 1000),
        checksum=checksum(planned.payload),
    )
    return m.encode(message)


# ---------------------------------------------------------------------- expected state, checksum
def expected_state(workload: Workload, offsets: Sequence[int]) -> dict[str, tuple[Node, int, str]]:
    """path -> (node, offset, pkg_id) after applying every package once, in order."""
    state: dict[str, tuple[Node, int, str]] = {}
    for planned, offset in zip(workload.packages, offsets, strict=True):
        package = planned.package
        if package.req_type == m.ReqType.DELETE:
            for root in package.roots:
                state.pop(root.path, None)
        else:
            for node in package.nodes:
                state[node.path] = (node, offset, package.package_id)
    return state


def canonical_row(
    path: str, properties: Any, binaries: Any, offset: int | None, pkg_id: str | None
) -> str:
    """One node as canonical JSON: from node_row() tuples and from Spark rows alike."""

    def field_of(value: Any, name: str, index: int) -> Any:
        return value[name] if hasattr(value, "asDict") else value[index]

    props = sorted(
        (
            name,
            field_of(v, "type", 0),
            bool(field_of(v, "multi", 1)),
            list(field_of(v, "values", 2)),
        )
        for name, v in (properties or {}).items()
    )
    bins = []
    for name, v in (binaries or {}).items():
        data = field_of(v, "data", 4)
        bins.append(
            (
                name,
                field_of(v, "blob_key", 0),
                field_of(v, "size", 1),
                field_of(v, "sha256", 2),
                field_of(v, "content_type", 3),
                bytes(data).hex() if data is not None else None,
            )
        )
    return json.dumps([path, props, sorted(bins), offset, pkg_id], separators=(",", ":"))


def digest(rows: Iterable[tuple[str, str]]) -> str:
    """sha256 over (path, canonical row) pairs in path order."""
    return _digest_sorted(sorted(rows))


def _digest_sorted(rows: Iterable[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for path, canonical in rows:
        h.update(path.encode())
        h.update(b"\x00")
        h.update(canonical.encode())
        h.update(b"\x01")
    return h.hexdigest()


def expected_digest(state: dict[str, tuple[Node, int, str]]) -> dict[str, Any]:
    def rows() -> Iterator[tuple[str, str]]:
        for path, (node, offset, pkg_id) in state.items():
            row = node_row(node, offset, pkg_id, PUB_AGENT, 0)
            yield path, canonical_row(path, row[4], row[5], offset, pkg_id)

    return {"nodes": len(state), "sha256": digest(rows())}


def table_digest(spark: Any, location: str) -> dict[str, Any]:
    """Node count and checksum of the current tree of a Delta table in the store's layout
    (path, properties, binaries, offset and package id of the last package that wrote the
    node), read with the query docs/content-store.md documents."""
    table = spark.sql(current_nodes_sql(quoted(location)))
    # Streamed in path order (Spark orders strings by UTF-8 bytes, i.e. by code point, as
    # Python does), one range of paths at a time: a table of 100,000 nodes need not fit the
    # driver.
    rows = (
        table.select("path", "properties", "binaries", "offset", "pkg_id")
        .repartitionByRange(DIGEST_PARTITIONS, "path")
        .sortWithinPartitions("path")
        .toLocalIterator()
    )
    counts = {"nodes": 0, "distinct_paths": 0}

    def pairs() -> Iterator[tuple[str, str]]:
        for path, group in itertools.groupby(rows, key=lambda r: r["path"]):
            canonical = sorted(
                canonical_row(path, r["properties"], r["binaries"], r["offset"], r["pkg_id"])
                for r in group
            )
            counts["nodes"] += len(canonical)
            counts["distinct_paths"] += 1
            for one in canonical:
                yield path, one

    sha256 = _digest_sorted(pairs())
    return {**counts, "sha256": sha256}


def update_stream(
    pages: int, count: int, *, seed: int = 2, size: int = DEFAULT_PACKAGE_BYTES
) -> list[Planned]:
    """``count`` ADD packages that update pages 0..pages-1 round-robin (versions 1, 2, ...)."""
    rng = random.Random(seed)
    out: list[Planned] = []
    for i in range(count):
        page, version = i % pages, i // pages + 1
        package = ContentPackage(
            package_id=f"bench-update-{i:06d}",
            req_type=m.ReqType.ADD,
            roots=[FilterRoot(path=p, deep=False) for p in page_paths(page)],
            nodes=page_nodes(page, version, rng, size),
        )
        out.append(Planned("update", page, package, encode_package(package)))
    return out
