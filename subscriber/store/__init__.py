"""The subscriber's content store: where imported packages land, with the offset they reached,
in the same commit.

Public interface, each in its module (importing the package starts no Spark): the
:class:`Store` protocol and its state types (``base``); two stores that keep it,
:class:`DeltaStore` (``delta``: one Delta Lake table, the product's store) and
:class:`MemoryStore` (``memory``: the same contract in memory, for tests and tools without
Spark; tests/contract/store_contract.py holds both to it). Inside: ``changes`` (the net effect
of a batch, computed before any Spark work), ``rows`` (nodes and bookkeeping as table rows),
``current_tree`` (the current tree query and the fold), ``delta_table`` (checkpoints,
compaction, VACUUM).
"""
