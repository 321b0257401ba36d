"""The Store contract in memory: the import logic without Spark, for fast tests and tools.

Nodes are kept as the Delta store reads them back (rows.node_row, so a value the Delta store
refuses is refused here too); a commit applies a whole ChangeSet or nothing. ``fail_commits``
makes the next commits fail (before or after they landed); ``history`` holds the offsets each
commit covered, so a package applied twice shows up twice. Opening again reads the state back
as a restarted process would.

One writer: ``view()`` is the same store as another process sees it (shared content, offset
and writer epoch, state of its own), so tests run two agents on one store. ``claim`` and the
refusal of a deposed writer's commits follow the Delta store's contract (``WriterDeposed``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace

from subscriber.errors import WriterDeposed
from subscriber.store.base import FileStats, PendingStatus, StepOutcome, StoreState
from subscriber.store.changes import ChangeSet, status_name
from subscriber.store.commits import ObservedCommits
from subscriber.store.rows import StoredNode, stored_node
from subscriber.writer.lease import LeaseRecord


@dataclass
class Shared:
    """What every view of one memory store sees."""

    offset: int | None = None
    version: int = 0  # the "table version": one more per commit of any view
    epoch: int = 0  # the writer epoch of the last claim (0: none)
    claims: list[tuple[int, str]] = field(default_factory=list)


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
    scopes: int = 0  # scope rows written and not folded (the tree is kept current anyway)
    # Maintenance: every call in order, with its argument; one "file" per commit until a
    # compaction.
    maintenance_calls: list[tuple[str, object]] = field(default_factory=list)
    import_thread_calls: list[bool] = field(default_factory=list)  # in_import_thread(starting)
    files: int = 0
    # The table's "bytes": one per node version and scope row written, until a fold leaves the
    # current tree and the scopes not folded.
    table_bytes: int = 0
    recorded_offsets: list[tuple[int, str]] = field(default_factory=list)  # record_offset calls
    shared: Shared = field(default_factory=Shared)
    epoch: int | None = None  # this view's claim (None: unguarded)
    _instance: str = field(default_factory=lambda: uuid.uuid4().hex)
    _clears: dict[str, int] = field(default_factory=dict)
    _sequences: dict[str, int] = field(default_factory=dict)
    _command_sequences: dict[str, int] = field(default_factory=dict)
    _clear_sequences: dict[str, int] = field(default_factory=dict)
    _paused: bool = False
    _statuses: list[PendingStatus] = field(default_factory=list)
    # Each view's own (a process's), over the shared version.
    commit_lock: ObservedCommits = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.commit_lock = ObservedCommits(lambda: self.shared.version)

    @property
    def _offset(self) -> int | None:
        return self.shared.offset

    @_offset.setter
    def _offset(self, value: int | None) -> None:
        self.shared.offset = value

    def view(self) -> MemoryStore:
        """The same store opened by another process."""
        return replace(self, state=None, epoch=None, commits_since_checkpoint=0)

    def claim(self, epoch: int, owner: str) -> None:
        if epoch < self.shared.epoch:
            raise WriterDeposed(f"memory store claimed by epoch {self.shared.epoch} > {epoch}")
        self.shared.epoch = self.epoch = epoch
        self.shared.claims.append((epoch, owner))

    def writer_epoch(self) -> int:
        return self.shared.epoch

    def _guard(self) -> None:
        """Refuse a write of a deposed view, as Delta drops it."""
        if self.epoch is not None and self.epoch < self.shared.epoch:
            raise WriterDeposed(f"memory store claimed by epoch {self.shared.epoch}")

    def open(self) -> StoreState:
        self.state = StoreState(
            instance_id=self._instance,
            offset=self._offset,
            clear_offsets=dict(self._clears),
            pending_statuses=sorted(self._statuses),
            scopes=self.scopes,
            sequences=dict(self._sequences),
            command_sequences=dict(self._command_sequences),
            clear_sequences=dict(self._clear_sequences),
            paused=self._paused,
        )
        self.commit_lock.opened()
        return self.state

    def begin(self) -> ChangeSet:
        return ChangeSet()

    def commit(self, changes: ChangeSet) -> None:
        assert self.state is not None, "open() the store first"
        last = changes.units[-1]
        nodes = {
            path: stored_node(node, *changes.node_offsets[path])
            for path, node in changes.upserts.items()
        }  # built first: a refused value fails the commit before anything changed
        self._guard()
        with self.commit_lock.content(changes, last.offset):
            self._land(changes, nodes)

    def _land(self, changes: ChangeSet, nodes: dict[str, StoredNode]) -> None:
        assert self.state is not None
        last = changes.units[-1]
        if self.fail_commits and not self.fail_after_landing:
            self.fail_commits -= 1
            raise RuntimeError("injected commit failure")
        self.shared.version += 1
        for path in [
            p for p, n in self.tree.items() if any(s.covers(p, n.offset) for s in changes.scopes)
        ]:
            del self.tree[path]
        self.tree.update(nodes)
        self.scopes += len(changes.scopes)
        self.table_bytes += len(nodes) + len(changes.scopes)
        statuses = [PendingStatus(o, a, status_name(s), n) for o, a, s, n in changes.statuses]
        self._statuses.extend(statuses)
        self._offset = last.offset
        _raise(self._sequences, changes.sequences)
        self.history.append((changes.first_offset, last.offset))
        self.files += 1
        self.commits_since_checkpoint += 1
        self.state.offset = last.offset
        self.state.pending_statuses.extend(statuses)
        self.state.scopes = self.scopes
        _raise(self.state.sequences, changes.sequences)
        if self.fail_commits:
            self.fail_commits -= 1
            raise RuntimeError("injected failure after the commit landed")

    def committed_offsets(self) -> list[int]:
        return sorted(o for lo, hi in self.history for o in range(lo, hi + 1) if o >= 0)

    def record_offset(self, offset: int, reason: str) -> None:
        assert self.state is not None
        self._guard()
        with self.commit_lock.content(None, offset):
            self.shared.version += 1
            self._offset = self.state.offset = offset
        self.recorded_offsets.append((offset, reason))

    def record_clear(
        self, offset: int, pub_agent: str, sequence: int = 0, up_to_sequence: int = 0
    ) -> int:
        assert self.state is not None
        self._guard()
        if sequence:
            _raise(self._command_sequences, {pub_agent: sequence})
            _raise(self.state.command_sequences, {pub_agent: sequence})
        if up_to_sequence:
            _raise(self._clear_sequences, {pub_agent: up_to_sequence})
            _raise(self.state.clear_sequences, {pub_agent: up_to_sequence})
        if offset > self.state.clear_offset(pub_agent):
            self._clears[pub_agent] = self.state.clear_offsets[pub_agent] = offset
        return self.state.clear_offset(pub_agent)

    def record_pause(self, paused: bool, pub_agent: str, sequence: int) -> None:
        assert self.state is not None
        self._guard()
        _raise(self._command_sequences, {pub_agent: sequence})
        _raise(self.state.command_sequences, {pub_agent: sequence})
        self._paused = self.state.paused = paused

    def forget_statuses(self, up_to_offset: int) -> None:
        assert self.state is not None
        self.maintenance_calls.append(("purge", up_to_offset))
        self._statuses[:] = [s for s in self._statuses if s[0] > up_to_offset]
        self.state.pending_statuses = [
            s for s in self.state.pending_statuses if s[0] > up_to_offset
        ]

    def fold(self, max_scopes: int) -> StepOutcome:
        assert self.state is not None
        self.maintenance_calls.append(("fold", max_scopes))
        with self.commit_lock:  # a rewrite: a version, the same tree
            self.shared.version += 1
        self.scopes = self.state.scopes = max(0, self.scopes - max_scopes)
        self.table_bytes = len(self.tree) + self.scopes
        return StepOutcome(self.files, self.files)

    def checkpoint(self) -> None:
        self.maintenance_calls.append(("checkpoint", None))
        self.checkpoints += 1
        self.commits_since_checkpoint = 0

    def in_maintenance_thread(self) -> None:
        pass  # nothing competes here

    def in_import_thread(self, starting: bool) -> None:
        self.import_thread_calls.append(starting)  # nothing competes here: only noted

    def file_stats(self) -> FileStats:
        return FileStats(self.files, self.table_bytes)

    def compact(self, target_file_bytes: int, min_files: int = 2) -> StepOutcome | None:
        self.maintenance_calls.append(("compact", target_file_bytes))
        if self.files < min_files:  # every file counts as small here
            return None
        before, self.files = self.files, 1
        return StepOutcome(before, self.files)

    def vacuum(self) -> StepOutcome:
        self.maintenance_calls.append(("vacuum", ()))
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


@dataclass
class MemoryLease:
    """A writer lease object in memory (subscriber.writer.lease.LeaseObject): a version
    counter as the token, compare-and-swap as on S3."""

    where: str = "memory-lease"
    record: LeaseRecord | None = None
    version: int = 0
    fail: bool = False  # reads and writes raise (the lease's storage unreachable)

    def read(self) -> tuple[LeaseRecord, str] | None:
        if self.fail:
            raise OSError("lease storage unreachable")
        return None if self.record is None else (self.record, str(self.version))

    def swap(self, record: LeaseRecord, expected: str | None) -> str | None:
        if self.fail:
            raise OSError("lease storage unreachable")
        current = None if self.record is None else str(self.version)
        if current != expected:
            return None
        self.record, self.version = record, self.version + 1
        return str(self.version)


def _raise(sequences: dict[str, int], new: dict[str, int]) -> None:
    """Keep the larger number per agent (the stored sequence rows' maximum)."""
    for agent, number in new.items():
        sequences[agent] = max(sequences.get(agent, 0), number)
