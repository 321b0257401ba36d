"""A store table's current tree read without a JVM (subscriber.tree_reader, delta-rs) with
the processed offset of the same version: what the read model starts from and is rebuilt
from; and the table's latest version, which the model polls for writes of others."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from subscriber.store.rows import KIND_OFFSET, StoredNode
from subscriber.tree_reader import open_tree


@dataclass(frozen=True)
class TreeSnapshot:
    version: int  # the Delta table version read
    processed: int | None  # its processed offset (None: none recorded)
    nodes: Iterator[StoredNode]  # the current tree, streamed (consume once)


class DeltaTree:
    """The table at ``location`` (delta-rs ``options``: subscriber.tree_reader.storage_options)."""

    def __init__(self, location: str, options: dict[str, str]) -> None:
        self.location = location
        self.options = options
        self._log: Any = None  # the table's log alone, followed for its latest version

    def latest(self) -> int:
        """The table's latest version: the commits since the last look are listed."""
        from deltalake import DeltaTable

        if self._log is None:
            self._log = DeltaTable(self.location, storage_options=self.options)
        else:
            self._log.update_incremental()
        return int(self._log.version())

    def read(self) -> TreeSnapshot:
        """The current tree at the table's latest version, and its processed offset."""
        import pyarrow as pa
        from deltalake import DeltaTable

        tree = open_tree(self.location, self.options)
        table = DeltaTable(self.location, version=tree.version, storage_options=self.options)
        offsets = pa.RecordBatchReader.from_stream(
            table.scan(columns=["offset"], predicate=f"kind = '{KIND_OFFSET}'")
        ).read_all()["offset"]
        processed = max(offsets.to_pylist(), default=None)
        return TreeSnapshot(tree.version, processed, tree.iter_nodes("/"))
