"""The read model of a real Delta store (subscriber/reads): built through delta-rs, kept current
by each commit's ChangeSet, equal after every commit to the store's Spark current-tree query
(adds, a deep replace, updates, a deep delete, a fold), and rebuilt when another writer commits
to the table behind its back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from subscriber.maintenance.delta_table import latest_version
from subscriber.reads.model import ReadModel
from subscriber.reads.sources import read_model
from subscriber.settings import SubscriberSettings
from subscriber.store.delta import DeltaStore
from subscriber.store.rows import StoredNode
from tests.subscriber.packages import add, delete, file_node, new_change_set, node

pytestmark = pytest.mark.integration

WAIT_S = 60.0


def model_tree(model: ReadModel) -> list[StoredNode]:
    return model.read(lambda r: list(r.all_nodes())).value


def caught_up(model: ReadModel, store: DeltaStore) -> None:
    assert model.wait_version(latest_version(store.spark, store.location), WAIT_S)
    answer = model.read(lambda r: (r.processed, list(r.all_nodes())))
    assert answer.value == (store.committed_offset(), store.nodes("/"))


def test_the_model_follows_every_commit_and_another_writer(spark: Any, tmp_path: Path) -> None:
    location = str(tmp_path / "store")
    store = DeltaStore(spark, location)
    store.open()
    settings = SubscriberSettings(agent_name="reads", store_path=location)
    model = read_model(settings, store, tmp_path, lambda: None)
    assert model is not None
    model.start()
    try:
        caught_up(model, store)
        built = model.last_build.version
        store.commit(
            new_change_set(
                [
                    add(0, "/site", node("/site", title="a"), node("/site/p", n=1)),
                    add(1, "/site/f.txt", file_node("/site/f.txt", b"bytes"), deep=False),
                ]
            )
        )
        caught_up(model, store)
        store.commit(new_change_set([add(2, "/site", node("/site", title="b"), node("/site/q"))]))
        caught_up(model, store)
        assert [n.path for n in model_tree(model)] == ["/site", "/site/q"]
        store.commit(new_change_set([delete(3, "/site/q"), add(4, "/x", node("/x", n=2))]))
        caught_up(model, store)
        store.fold(100)  # a rewrite of this process: the same tree, a new version
        caught_up(model, store)
        assert model.last_build.version == built  # built once: every commit applied to it
        other = DeltaStore(spark.newSession(), location)  # another writer
        other.open()
        other.commit(new_change_set([add(5, "/y", node("/y"))]))
        caught_up(model, store)
        assert "/y" in [n.path for n in model_tree(model)]
        assert model.last_build.version > built  # rebuilt from the table
    finally:
        model.stop()
