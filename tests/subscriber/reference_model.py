"""An independent model of a subscriber's content tree for the crash test: random packages over a
small path space, and the tree that applying each of them once, in order, must give.

Deliberately shares no code with subscriber/store/changes.py: the model is a plain dict path ->
expected node, and a package is applied by the content semantics read literally:
* ADD, deep root r: r and everything below it are removed, then the package's nodes are put;
* ADD, shallow root r: the node r is put (its properties replaced), its children stay;
* DELETE, deep root r: r and everything below it are removed; shallow: the node r only;
* TEST: nothing changes.
Property values are kept in the store's canonical text form (long and double as decimal text,
bool as true/false) and binaries as the bytes they must resolve to.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from journal.content.package import Binary, BlobRef, ContentPackage, FilterRoot, Node
from journal.wire import messages as m

ADD, DELETE, TEST = m.ReqType.ADD, m.ReqType.DELETE, m.ReqType.TEST

# A small tree, so that later packages keep overwriting and deleting what earlier ones wrote:
# /content, 3 sections, 3 pages each, 2 components per page (31 paths).
ROOT = "/content"
SECTIONS = [f"{ROOT}/s{i}" for i in range(3)]
PAGES = [f"{s}/{p}" for s in SECTIONS for p in ("a", "b", "c")]
COMPONENTS = [f"{p}/{c}" for p in PAGES for c in ("x", "y")]
ALL_PATHS = [ROOT, *SECTIONS, *PAGES, *COMPONENTS]

# Package mix: deep/shallow ADD and DELETE, a few TEST packages; the root of the whole tree
# is rarely the target (a deep DELETE of it empties the store).
KINDS = [("add-deep", 35), ("add-shallow", 30), ("delete-deep", 15), ("delete-shallow", 15)]
KINDS += [("test", 5)]
ROOT_WEIGHTS = {ROOT: 1, **dict.fromkeys(SECTIONS, 4), **dict.fromkeys(PAGES, 3)}
ROOT_WEIGHTS.update(dict.fromkeys(COMPONENTS, 1))
# Share of packages sent by reference through the blob store (spilled), of nodes carrying a
# small inline binary, and of nodes whose binary is a blob-store reference.
SPILL_SHARE = 0.10
INLINE_BINARY_SHARE = 0.30
BLOB_BINARY_SHARE = 0.03
# Probability that a deep ADD carries its root node, and each other path of its subtree (what
# it does not carry is removed).
ROOT_CARRY_SHARE = 0.85
CARRY_SHARE = 0.6

Prop = tuple[str, bool, list[str]]  # (type, multi, values in canonical text)


@dataclass(frozen=True)
class ExpectedNode:
    properties: dict[str, Prop]
    binaries: dict[str, bytes]  # property name -> content the binary must resolve to


@dataclass
class GeneratedPackage:
    pkg_id: str
    kind: str
    roots: list[tuple[str, bool]]
    nodes: dict[str, ExpectedNode] = field(default_factory=dict)
    proto: ContentPackage = field(default_factory=ContentPackage)
    spilled: bool = False


def within(path: str, root: str) -> bool:
    return path == root or path.startswith(root + "/")


class ReferenceModel:
    """The content tree after applying packages once each, in order."""

    def __init__(self) -> None:
        self.tree: dict[str, ExpectedNode] = {}

    def _remove_subtree(self, root: str) -> None:
        for path in [p for p in self.tree if within(p, root)]:
            del self.tree[path]

    def apply(self, pkg: GeneratedPackage) -> None:
        if pkg.kind.startswith("add"):
            for root, deep in pkg.roots:
                if deep:
                    self._remove_subtree(root)
            self.tree.update(pkg.nodes)
        elif pkg.kind.startswith("delete"):
            for root, deep in pkg.roots:
                if deep:
                    self._remove_subtree(root)
                else:
                    self.tree.pop(root, None)


class PackageGenerator:
    """Deterministic random packages (given the seed); binaries by reference are uploaded with
    ``put_blob(key, data)``."""

    def __init__(self, seed: int, put_blob: Callable[[str, bytes], None]) -> None:
        self.rng = random.Random(seed)
        self.put_blob = put_blob
        self.count = 0

    def _node(self, path: str, pkg_id: str) -> tuple[Node, ExpectedNode]:
        rng = self.rng
        node = Node(path=path)
        props: dict[str, Prop] = {}
        bins: dict[str, bytes] = {}
        node.properties["title"].string_value = f"{path} by {pkg_id}"
        props["title"] = ("string", False, [f"{path} by {pkg_id}"])
        rev = rng.randrange(1_000_000)
        node.properties["rev"].long_value = rev
        props["rev"] = ("long", False, [str(rev)])
        if rng.random() < 0.5:
            flag = rng.random() < 0.5
            node.properties["flag"].bool_value = flag
            props["flag"] = ("bool", False, ["true" if flag else "false"])
        if rng.random() < 0.4:
            score = rng.randrange(-400, 400) / 8  # exact in binary: repr round-trips
            node.properties["score"].double_value = score
            props["score"] = ("double", False, [repr(score)])
        if rng.random() < 0.4:
            tags = [f"t{rng.randrange(50)}" for _ in range(rng.randrange(0, 4))]
            for tag in tags:
                node.properties["tags"].multi_value.values.add().string_value = tag
            if not tags:  # an empty multi-value must still exist as a property
                node.properties["tags"].multi_value.SetInParent()
            props["tags"] = ("string", True, tags)
        if rng.random() < INLINE_BINARY_SHARE:
            data = rng.randbytes(rng.randrange(0, 200))
            node.properties["data"].binary_value.CopyFrom(
                Binary(inline=data, content_type="application/octet-stream")
            )
            bins["data"] = data
        if rng.random() < BLOB_BINARY_SHARE:
            data = rng.randbytes(rng.randrange(1_000, 20_000))
            # Flat keys: on file-system backed S3 servers no key may be another's "parent".
            key = f"binaries/{pkg_id}/{path.strip('/').replace('/', '.')}"
            self.put_blob(key, data)
            ref = BlobRef(
                key=key,
                size=len(data),
                sha256=hashlib.sha256(data).hexdigest(),
                content_type="application/octet-stream",
            )
            node.properties["jcr:data"].binary_value.CopyFrom(Binary(ref=ref))
            bins["jcr:data"] = data
        return node, ExpectedNode(props, bins)

    def package(self) -> GeneratedPackage:
        rng = self.rng
        pkg_id = f"crash-{self.count:05d}"
        self.count += 1
        kind = rng.choices([k for k, _ in KINDS], [w for _, w in KINDS])[0]
        paths, weights = list(ROOT_WEIGHTS), list(ROOT_WEIGHTS.values())
        root = rng.choices(paths, weights)[0]
        roots = [(root, kind.endswith("deep"))]
        if kind == "add-deep" and rng.random() < 0.15:  # a second, disjoint deep root
            others = [p for p in PAGES if not within(p, root) and not within(root, p)]
            if others:
                roots.append((rng.choice(others), True))
        pkg = GeneratedPackage(pkg_id, kind, roots, spilled=rng.random() < SPILL_SHARE)
        req = ADD if kind.startswith("add") else DELETE if kind.startswith("delete") else TEST
        if kind == "add-deep":
            carried = [
                p
                for r, _ in roots
                for p in ALL_PATHS
                if within(p, r) and rng.random() < (ROOT_CARRY_SHARE if p == r else CARRY_SHARE)
            ]
        elif kind == "add-shallow":
            carried = [root]
        else:
            carried = []
        nodes = []
        for path in carried:
            node, expected = self._node(path, pkg_id)
            nodes.append(node)
            pkg.nodes[path] = expected
        pkg.proto = ContentPackage(
            package_id=pkg_id,
            req_type=req,
            roots=[FilterRoot(path=p, deep=d) for p, d in roots],
            nodes=nodes,
        )
        return pkg
