"""Where an agent's read model reads the tree it starts from: a Delta store's table through
delta-rs (no JVM), a memory store's tree (tests and tools)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from subscriber.reads.delta_tree import DeltaTree, TreeSnapshot
from subscriber.reads.model import ReadModel
from subscriber.settings import SubscriberSettings
from subscriber.store.base import Store
from subscriber.store.delta import DeltaStore
from subscriber.store.memory import MemoryStore
from subscriber.tree_reader import storage_options


def _memory_tree(store: MemoryStore) -> TreeSnapshot:
    with store.commit_lock.quiet():  # no commit half applied
        nodes = sorted(store.tree.values(), key=lambda n: n.path)
        return TreeSnapshot(store.shared.version, store.shared.offset, iter(nodes))


def read_model(
    settings: SubscriberSettings,
    store: Store,
    workdir: Path | None,
    gate: Callable[[], str | None],
) -> ReadModel | None:
    """The read model of ``store`` (not started), its index files in ``workdir`` (None: a
    temporary directory); None for a store of another kind (a test's)."""
    if isinstance(store, MemoryStore):
        source: Callable[[], TreeSnapshot] = lambda: _memory_tree(store)  # noqa: E731
        latest: Callable[[], int] = lambda: store.shared.version  # noqa: E731
    elif isinstance(store, DeltaStore):
        table = DeltaTree(store.location, storage_options(store.location, settings.blobstore))
        source, latest = table.read, table.latest
    else:
        return None
    return ReadModel(settings.agent_name, source, latest, store.commit_lock, workdir, gate)
