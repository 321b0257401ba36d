"""What the subscriber needs from its content store: the ``Store`` protocol and the state a
store hands back when it opens.

The import loop only ever talks to a ``Store``: it asks for a unit of work (``begin``), merges
packages into it, and commits it whole. ``subscriber.store.delta.DeltaStore`` is the product's
store (a Delta table written through Spark); tests use an in-memory one with the same contract,
so retry, skip, clear and failure logic is tested without Spark.

The contract of ``commit``: a batch's content changes, its processed offset and its statuses
land together or not at all; after an error the batch may have landed only if the store's
offset says so (``state.offset`` is then the batch's last offset).

One writer per store (subscriber.writer.lease): a process that took the writer lease with
epoch N ``claim``s the store with N before it opens it. From then on a write of a process
with a smaller epoch fails with ``WriterDeposed`` inside the store's own commit, whatever it
checked before: it neither lands nor overwrites anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import NamedTuple, Protocol

from subscriber.store.changes import ChangeSet
from subscriber.store.commits import ObservedCommits
from subscriber.store.rows import StoredNode

# The agent of clear rows written before clears named their publisher agent: they apply to
# every agent.
EVERY_AGENT = ""


class PendingStatus(NamedTuple):
    """A package status committed with its batch and not sent yet."""

    offset: int
    pub_agent: str
    status: str  # the Status enum value's name
    # The package's sequence number (0: not numbered), so that a publisher reading another
    # region's copy places the status at its own offset (docs/regions.md).
    sequence: int = 0


@dataclass
class StoreState:
    """What a subscriber needs from its store at start."""

    instance_id: str
    offset: int | None  # last processed package offset; None for a brand-new store
    # Clear offset per publisher agent (EVERY_AGENT: clears that name none).
    clear_offsets: dict[str, int] = field(default_factory=dict)
    pending_statuses: list[PendingStatus] = field(default_factory=list)  # in offset order
    sent_statuses_up_to: int = -1  # statuses up to here were sent and may be purged
    scopes: int = 0  # scope rows not yet folded (``Store.fold``)
    # Last sequence number applied per publisher agent, of packages and of clear commands
    # (subscriber/bookkeeper/sequences.py); committed with the content and the clear offset.
    sequences: dict[str, int] = field(default_factory=dict)
    command_sequences: dict[str, int] = field(default_factory=dict)
    # Packages of an agent numbered up to here were cleared (a clear by sequence number).
    clear_sequences: dict[str, int] = field(default_factory=dict)
    paused: bool = False  # by a pause command (subscriber/bookkeeper/commands.py), until resumed

    def clear_offset(self, pub_agent: str) -> int:
        """Packages of ``pub_agent`` up to this offset were cleared (-1: none)."""
        return max(self.clear_offsets.get(pub_agent, -1), self.clear_offsets.get(EVERY_AGENT, -1))

    def cleared(self, pub_agent: str, offset: int, sequence: int) -> bool:
        """A clear covers ``pub_agent``'s package at ``offset`` numbered ``sequence`` (0: not
        numbered, which only a clear by offset can cover)."""
        return offset <= self.clear_offset(pub_agent) or (
            0 < sequence <= self.clear_sequences.get(pub_agent, 0)
        )


@dataclass(frozen=True)
class FileStats:
    """The data files the store's current version reads."""

    files: int
    bytes: int


@dataclass(frozen=True)
class StepOutcome:
    """What one maintenance step did to the store's files."""

    files_before: int  # active data files before and after the step
    files_after: int
    files_deleted: int = 0  # removed from storage (VACUUM)
    bytes_reclaimed: int = 0

    @classmethod
    def from_dict(cls, raw: object) -> StepOutcome:
        """An outcome from ``dataclasses.asdict`` (decoded JSON: the fold worker's reply);
        ValueError for anything else."""
        if not isinstance(raw, dict) or set(raw) != {f.name for f in fields(cls)}:
            raise ValueError("a step outcome has exactly the fields of StepOutcome")
        if not all(type(n) is int and n >= 0 for n in raw.values()):
            raise ValueError("a step outcome's counts are integers >= 0")
        return cls(**raw)


class Store(Protocol):
    location: str
    state: StoreState | None
    # Commits since this process last checkpointed the store (``checkpoint``).
    commits_since_checkpoint: int
    # Held by each of its commits; tells a listener (the read model) about each.
    commit_lock: ObservedCommits

    def claim(self, epoch: int, owner: str) -> None:
        """Make ``epoch`` the store's writer epoch (creating the store if needed): writes of
        smaller epochs fail from now on, and so do this process's writes once a later epoch
        claims it. Raises ``WriterDeposed`` when a later epoch already did."""

    def writer_epoch(self) -> int:
        """The highest writer epoch that claimed the store (0: none)."""

    def open(self) -> StoreState:
        """Create the store if needed and load its state."""

    def begin(self) -> ChangeSet:
        """A unit of work against the content the store holds now."""

    def commit(self, changes: ChangeSet) -> None:
        """Apply a unit of work: content, offset, statuses and the highest sequence number per
        agent (``changes.sequences``) in one atomic commit."""

    def record_offset(self, offset: int, reason: str) -> None:
        """Commit a processed offset with no content change (start position)."""

    def record_clear(
        self, offset: int, pub_agent: str, sequence: int = 0, up_to_sequence: int = 0
    ) -> int:
        """Persist a clear of ``pub_agent``'s packages: up to ``offset`` (-1: none) and up to
        package number ``up_to_sequence`` (0: none), each kept as max(old, new), and in the
        same commit the clear command's own sequence number (0: not numbered); returns the
        clear offset in force."""

    def record_pause(self, paused: bool, pub_agent: str, sequence: int) -> None:
        """Persist the pause state (``state.paused``) and, in the same commit, the pause
        command's sequence number for ``pub_agent``."""

    def forget_statuses(self, up_to_offset: int) -> None:
        """Remove sent statuses (offset <= up_to_offset) and superseded offset rows."""

    def fold(self, max_scopes: int) -> StepOutcome:
        """Remove the node versions that the oldest ``max_scopes`` scopes replaced, and those
        scopes, in one commit; the current tree stays the same (``state.scopes``: how many
        are left)."""

    def checkpoint(self) -> None:
        """Compact the store's log so readers replay less (a no-op where there is none)."""

    def in_maintenance_thread(self) -> None:
        """Called first in the maintenance thread (subscriber.maintenance.scheduler): the store's
        work in this thread yields to the imports' from now on."""

    def in_import_thread(self, starting: bool) -> None:
        """Called by the import loop (subscriber.bookkeeper.loop) when it starts, with
        ``starting`` True, and once its agent is ready, with False: the store's work in this
        thread comes before the other agents' imports while starting (a new instance is out
        of service until then), and takes turns with them after."""

    # Maintenance (subscriber.maintenance.scheduler): each call is one short operation on the
    # store that changes neither content nor offset.
    def file_stats(self) -> FileStats:
        """Active data files."""

    def compact(self, target_file_bytes: int, min_files: int = 2) -> StepOutcome | None:
        """Merge the files below half ``target_file_bytes`` into files of up to that size
        when at least ``min_files`` are; None, and nothing rewritten, when fewer are."""

    def vacuum(self) -> StepOutcome:
        """Delete files no version younger than the store's retention (``set_retention``)
        reads, and files no version ever read, such as those of a commit that crashed."""

    def set_retention(self, retention_s: float, log_retention_s: float) -> bool:
        """Keep removed files ``retention_s`` and the log ``log_retention_s``; True when that
        changed the store."""

    def nodes(self, root: str = "/", *, deep: bool = True) -> list[StoredNode]:
        """The nodes at and below ``root`` (``deep``), or ``root`` and its children."""

    def node(self, path: str) -> StoredNode | None: ...
