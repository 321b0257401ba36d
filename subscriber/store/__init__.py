"""The subscriber's content store: where imported packages land, with the offset they reached,
in the same commit.

Public interface: the :class:`Store` protocol and its state types (``base``); two stores that
keep it, :class:`DeltaStore` (``delta``: one Delta Lake table, the product's store) and
:class:`MemoryStore` (``memory``: the same contract in memory, for tests and tools without
Spark; tests/contract/store_contract.py holds both to it). Inside: ``changes`` (the net effect
of a batch, computed before any Spark work), ``rows`` (nodes and bookkeeping as table rows),
``current_tree`` (the current tree query and the fold), ``delta_maintenance`` (checkpoints,
compaction, VACUUM).
"""

from subscriber.store.base import EVERY_AGENT, FileStats, StepOutcome, Store, StoreState
from subscriber.store.changes import ChangeSet, Unit
from subscriber.store.delta import DeltaStore
from subscriber.store.memory import MemoryStore
from subscriber.store.rows import StoredNode

__all__ = [
    "EVERY_AGENT",
    "ChangeSet",
    "DeltaStore",
    "FileStats",
    "MemoryStore",
    "StepOutcome",
    "Store",
    "StoreState",
    "StoredNode",
    "Unit",
]
