"""The Store contract in memory, for tests of the import logic without Spark.

Nodes are kept as the Delta store reads them back (rows.node_row, so a value the Delta store
refuses is refused here too); a commit applies a whole ChangeSet or nothing. ``fail_commits``
makes the next commits fail (before or after they landed); ``history`` holds the offsets each
commit covered, so a package applied twice shows up twice. Opening again reads the state back
as a restarted process would.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from journal.wire.package import Node
from subscriber.changes import ChangeSet, status_name
from subscriber.rows import BinaryInfo, StoredNode, node_row
from subscriber.store import FileStats, StepOutcome, StoreState


def stored(node: Node, offset: int, pkg_id: str, pub_agent: str) -> StoredNode:
    row = node_row(node, offset, pkg_id, pub_agent, int(time.time() * 1000))
    properties = {k: (t, multi, list(v)) for k, (t, multi, v) in row[4].items()}
    binaries = {k: BinaryInfo(*b) for k, b in row[5].items()}
    return StoredNode(node.path, properties, binaries, offset, pkg_id)


@dataclass
class MemoryStore:
    location: str = "memory"
    state: StoreState | None = None
    commits_since_checkpoint: int = 0
    tree: dict[str, StoredNode] = field(default_factory=dict)
    history: list[tuple[int, int]] = field(default_factory=list)  # (first, last) per commit
    fail_commits: int = 0  # the next N commits raise
    fail_after_landing: bool = False  # ... after having landed (as a lost Delta answer)
    checkpoints: int = 0
    # Maintenance: every call in order, with its argument; one "file" per commit until a
    # compaction.
    maintenance_calls: list[tuple[str, object]] = field(default_factory=list)
    files: int = 0
    recorded_offsets: list[tuple[int, str]] = field(default_factory=list)  # record_offset calls
    _offset: int | None = None
    _instance: str = field(default_factory=lambda: uuid.uuid4().hex)
    _clears: dict[str, int] = field(default_factory=dict)
    _statuses: list[tuple[int, str, str]] = field(default_factory=list)

    def open(self) -> StoreState:
        self.state = StoreState(
            instance_id=self._instance,
            offset=self._offset,
            clear_offsets=dict(self._clears),
            pending_statuses=sorted(self._statuses),
        )
        return self.state

    def begin(self) -> ChangeSet:
        return ChangeSet(self.tree.keys())

    def commit(self, changes: ChangeSet) -> None:
        assert self.state is not None, "open() the store first"
        last = changes.units[-1]
        nodes = {
            path: stored(node, *changes.node_offsets[path], last.pub_agent)
            for path, node in changes.upserts.items()
        }  # built first: a refused value fails the commit before anything changed
        if self.fail_commits and not self.fail_after_landing:
            self.fail_commits -= 1
            raise RuntimeError("injected commit failure")
        for path in changes.deletes:
            del self.tree[path]
        self.tree.update(nodes)
        statuses = [(o, a, status_name(s)) for o, a, s in changes.statuses]
        self._statuses.extend(statuses)
        self._offset = last.offset
        self.history.append((changes.first_offset, last.offset))
        self.files += 1
        self.commits_since_checkpoint += 1
        self.state.offset = last.offset
        self.state.pending_statuses.extend(statuses)
        if self.fail_commits:
            self.fail_commits -= 1
            raise RuntimeError("injected failure after the commit landed")

    def committed_offsets(self) -> list[int]:
        return sorted(o for lo, hi in self.history for o in range(lo, hi + 1) if o >= 0)

    def record_offset(self, offset: int, reason: str) -> None:
        assert self.state is not None
        self._offset = self.state.offset = offset
        self.recorded_offsets.append((offset, reason))

    def record_clear(self, offset: int, pub_agent: str) -> int:
        assert self.state is not None
        if offset > self.state.clear_offset(pub_agent):
            self._clears[pub_agent] = self.state.clear_offsets[pub_agent] = offset
        return self.state.clear_offset(pub_agent)

    def forget_statuses(self, up_to_offset: int) -> None:
        assert self.state is not None
        self.maintenance_calls.append(("purge", up_to_offset))
        self._statuses = [s for s in self._statuses if s[0] > up_to_offset]
        self.state.pending_statuses = [
            s for s in self.state.pending_statuses if s[0] > up_to_offset
        ]

    def checkpoint(self) -> None:
        self.maintenance_calls.append(("checkpoint", None))
        self.checkpoints += 1
        self.commits_since_checkpoint = 0

    def file_stats(self, small_file_bytes: int | None = None) -> FileStats:
        return FileStats(self.files, 0, None if small_file_bytes is None else self.files)

    def compact(self, target_file_bytes: int) -> StepOutcome:
        self.maintenance_calls.append(("compact", target_file_bytes))
        before, self.files = self.files, min(self.files, 1)
        return StepOutcome(before, self.files)

    def vacuum(self, *, full: bool) -> StepOutcome:
        self.maintenance_calls.append(("vacuum", (full,)))
        return StepOutcome(self.files, self.files)

    def set_retention(self, retention_s: float, log_retention_s: float) -> bool:
        self.maintenance_calls.append(("retention", (retention_s, log_retention_s)))
        return True

    def nodes(self, root: str = "/", *, deep: bool = True) -> list[StoredNode]:
        def selected(path: str) -> bool:
            if deep:
                return root == "/" or path == root or path.startswith(root.rstrip("/") + "/")
            return path == root or path.rpartition("/")[0] == root.rstrip("/")

        return sorted((n for p, n in self.tree.items() if selected(p)), key=lambda n: n.path)

    def node(self, path: str) -> StoredNode | None:
        return self.tree.get(path)
