"""The current tree of the Delta store (node versions that no later scope covers) against the
in-memory store's, for random streams of deep and shallow ADDs and DELETEs committed in random
batches: before folding, after partial folds and after a full one."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from subscriber.store.changes import Unit
from subscriber.store.delta import DeltaStore
from subscriber.store.memory import MemoryStore
from subscriber.store.rows import KIND_SCOPE, StoredNode
from tests.subscriber.packages import add, delete, node

pytestmark = pytest.mark.integration

# A small tree, so that packages replace, nest and delete each other's nodes often.
PATHS = ["/a", "/a/b", "/a/b/c", "/a/bc", "/a/d", "/ab", "/e", "/e/f", "/e/f/g"]


def random_units(rng: random.Random, count: int) -> list[Unit]:
    units: list[Unit] = []
    for offset in range(count):
        root = rng.choice(PATHS)
        deep = rng.random() < 0.6
        if rng.random() < 0.25:
            units.append(delete(offset, root, deep=deep))
            continue
        below = [p for p in PATHS if p == root or (deep and p.startswith(root + "/"))]
        nodes = [node(p, v=f"{p}@{offset}") for p in below if p == root or rng.random() < 0.7]
        units.append(add(offset, root, *nodes, deep=deep))
    return units


def commit_in_batches(store: DeltaStore | MemoryStore, units: list[Unit], sizes: list[int]) -> None:
    start = 0
    for size in sizes:
        changes = store.begin()
        for unit in units[start : start + size]:
            changes.add(unit)
        store.commit(changes)
        start += size


def tree(nodes: list[StoredNode]) -> dict[str, tuple[Any, int]]:
    return {n.path: (n.properties["v"][2], n.offset) for n in nodes}


@pytest.mark.parametrize("seed", [1, 2])
def test_the_current_tree_is_the_model_s_before_and_after_folding(
    spark: Any, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    units = random_units(rng, 40)
    sizes: list[int] = []
    while sum(sizes) < len(units):
        sizes.append(min(rng.choice([1, 2, 5, 9]), len(units) - sum(sizes)))
    model = MemoryStore()
    model.open()
    commit_in_batches(model, units, sizes)
    expected = tree(model.nodes())

    store = DeltaStore(spark, str(tmp_path / "store"))
    store.open()
    commit_in_batches(store, units, sizes)
    assert tree(store.nodes()) == expected
    # The single-node and subtree reads take the same view: at a root, inside, at a leaf, and
    # beside a path it prefixes (/a and /ab, /a/b and /a/bc).
    for path in ["/a", "/a/b", "/ab", "/e/f/g"]:
        assert tree([n for n in [store.node(path)] if n]) == {
            p: v for p, v in expected.items() if p == path
        }
        assert tree(store.nodes(path)) == {
            p: v for p, v in expected.items() if p == path or p.startswith(path + "/")
        }

    assert store.state is not None
    assert store.state.scopes == len(units)  # one root per package
    store.fold(max_scopes=7)  # the oldest scopes only
    assert 0 < store.state.scopes < len(units)
    assert tree(store.nodes()) == expected
    while store.state.scopes:
        store.fold(max_scopes=7)
    assert tree(store.nodes()) == expected
    table = spark.read.format("delta").load(store.location)
    assert table.where(f"kind = '{KIND_SCOPE}'").count() == 0
    assert table.where("kind = 'node'").count() == len(expected)  # nothing replaced is left
    assert DeltaStore(spark, store.location).open().scopes == 0
