"""Every reader of a store's current tree gives Spark's: scd's own (subscriber/tree_reader.py)
and the DuckDB, polars and delta-rs queries of docs/content-store.md, run as the document
shows them, on random streams of deep and shallow adds and deletes committed by the real
store through Spark, at every few commits, at earlier versions, and after partial and full
folds."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from journal.content.package import Node
from subscriber.store.changes import Unit
from subscriber.store.delta import DeltaStore
from subscriber.store.rows import StoredNode
from subscriber.tree_reader import StoreTree, open_tree
from tests.subscriber.packages import add, delete, node

pytestmark = pytest.mark.integration

DOC = Path(__file__).resolve().parents[3] / "docs" / "content-store.md"
SECTION = "## The current tree from any Delta reader"
# Longer than the 32 characters of a path Delta's file statistics keep: a truncated maximum
# must not make a reader skip the file.
LONG = "/long-" + "l" * 40
# The root rarely (a deep add or delete of / replaces everything), a quote and a non-ASCII name
# (literals), paths that prefix others (/a and /ab, LONG and LONG + "x").
PATHS = [
    "/a",
    "/a/b",
    "/a/b/c",
    "/a/bc",
    "/ab",
    "/e",
    "/e/f",
    "/e/f/g",
    "/q'uote",
    "/\u00fcber",
    LONG,
    f"{LONG}/m",
    f"{LONG}/m/n",
    f"{LONG}x",
]
ROOTS_READ = ["/", "/a", "/a/b", "/ab", "/e/f/g", LONG, "/q'uote", "/missing"]


def reader_snippets() -> dict[str, str]:
    """The document's Python blocks that compute ``tree``, by the reader they import."""
    section = DOC.read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    snippets = {}
    for block in blocks:
        if "tree = " in block:
            name = re.search(r"^import (\w+)", block, re.MULTILINE)
            assert name is not None, block
            snippets[name.group(1)] = block
    assert set(snippets) == {"duckdb", "polars", "pyarrow"}, sorted(snippets)
    return snippets


def versions_of(tree: Any) -> list[tuple[str, int, str]]:
    """(path, offset, package id) of a reader's result rows, sorted."""
    table = tree if isinstance(tree, pa.Table) else tree.to_arrow()
    rows = zip(*(table.column(c).to_pylist() for c in ("path", "offset", "pkg_id")), strict=True)
    return sorted(rows)


def random_node(rng: random.Random, path: str, offset: int) -> Node:
    props: dict[str, str | int | bytes] = {"v": f"{path}@{offset}"}
    if rng.random() < 0.3:
        props["n"] = offset
    if rng.random() < 0.3:
        props["data"] = rng.randbytes(rng.randrange(0, 40))
    return node(path, **props)


def random_units(rng: random.Random, count: int) -> list[Unit]:
    units: list[Unit] = []
    for offset in range(count):
        root = "/" if rng.random() < 0.03 else rng.choice(PATHS)
        deep = rng.random() < 0.6
        if rng.random() < 0.25:
            units.append(delete(offset, root, deep=deep))
            continue
        below = [p for p in ["/", *PATHS] if p == root or (deep and p.startswith(root + "/"))]
        if root == "/" and deep:
            below = ["/", *PATHS]
        nodes = [random_node(rng, p, offset) for p in below if p == root or rng.random() < 0.7]
        units.append(add(offset, root, *nodes, deep=deep))
    return units


def ordered(nodes: list[StoredNode]) -> list[StoredNode]:
    return sorted(nodes, key=lambda n: (n.path, n.offset))


def below(nodes: list[StoredNode], root: str, *, deep: bool) -> list[StoredNode]:
    """The nodes of a subtree read: ``root`` and those below it (``deep``) or its children."""
    return [
        n
        for n in nodes
        if n.path == root
        or (root == "/" and deep)
        or (deep and n.path.startswith(root + "/"))
        or (not deep and n.path.rpartition("/")[0] == root.rstrip("/"))
    ]


def check_readers(store: DeltaStore, snippets: dict[str, str]) -> StoreTree:
    """Every reader against Spark's current tree, now; returns scd's reader of this version.
    Spark reads the whole tree once (its subtree reads: test_current_tree.py)."""
    expected = ordered(store.nodes())
    tree = open_tree(store.location)
    assert ordered(tree.nodes()) == expected
    assert sorted(n.path for n in tree.iter_nodes()) == [n.path for n in expected]
    for root in ROOTS_READ:
        assert ordered(tree.nodes(root)) == below(expected, root, deep=True), root
        assert ordered(tree.nodes(root, deep=False)) == below(expected, root, deep=False), root
        assert tree.node(root) == next((n for n in expected if n.path == root), None), root
    versions = sorted((n.path, n.offset, n.pkg_id) for n in expected)
    for name, snippet in snippets.items():
        scope: dict[str, Any] = {"store": store.location, "options": {}}
        exec(snippet, scope)
        assert versions_of(scope["tree"]) == versions, name
    return tree


@pytest.mark.parametrize("seed", [11])
def test_every_reader_gives_spark_s_current_tree(spark: Any, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    snippets = reader_snippets()
    units = random_units(rng, 40)
    store = DeltaStore(spark, str(tmp_path / "store"))
    store.open()
    seen: list[tuple[StoreTree, list[StoredNode]]] = []
    start = 0
    for commits, size in enumerate(iter(lambda: rng.randint(1, 6), None), start=1):
        changes = store.begin()
        for unit in units[start : start + size]:
            changes.add(unit)
        store.commit(changes)
        start += size
        if commits % 4 == 0 or start >= len(units):  # four commits between checks
            tree = check_readers(store, snippets)
            seen.append((tree, ordered(tree.nodes())))
        if start >= len(units):
            break
    assert len(seen) >= 3
    assert len({tree.version for tree, _ in seen}) == len(seen)

    store.fold(max_scopes=9)  # the oldest scopes only: versions deleted, files rewritten
    assert store.state is not None
    assert store.state.scopes > 0
    check_readers(store, snippets)
    store.fold(max_scopes=len(units))
    folded = check_readers(store, snippets)
    assert folded.scopes().at == {}
    assert ordered(folded.nodes()) == seen[-1][1]
    # An earlier version reads as it was (the fold's retention keeps its files).
    for tree, nodes in seen:
        assert ordered(open_tree(store.location, version=tree.version).nodes()) == nodes
