"""The subscriber's content store: where imported packages land, with the offset they reached,
in the same commit.

Public interface, each imported from its module (importing the package starts no Spark): the
:class:`subscriber.store.base.Store` protocol and its state types, and two stores that keep it:
:class:`subscriber.store.delta.DeltaStore` (one Delta Lake table, the product's store) and
:class:`subscriber.store.memory.MemoryStore` (the same contract in memory, for tests and tools
without Spark; tests/contract/store_contract.py holds both to it).
"""
