"""What the subscriber needs from its content store: the ``Store`` protocol and the state a
store hands back when it opens.

The import loop only ever talks to a ``Store``: it asks for a unit of work (``begin``), folds
packages into it, and commits it whole. ``subscriber.delta_store.DeltaStore`` is the product's
store (a Delta table written through Spark); tests use an in-memory one with the same contract,
so retry, skip, clear and failure logic is tested without Spark.

The contract of ``commit``: a batch's content changes, its processed offset and its statuses
land together or not at all; after an error the batch may have landed only if the store's
offset says so (``state.offset`` is then the batch's last offset).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from subscriber.changes import ChangeSet
from subscriber.rows import StoredNode

# The agent of clear rows written before clears named their publisher agent: they apply to
# every agent.
EVERY_AGENT = ""


@dataclass
class StoreState:
    """What a subscriber needs from its store at start."""

    instance_id: str
    offset: int | None  # last processed package offset; None for a brand-new store
    # Clear offset per publisher agent (EVERY_AGENT: clears that name none).
    clear_offsets: dict[str, int] = field(default_factory=dict)
    pending_statuses: list[tuple[int, str, str]] = field(default_factory=list)
    # (offset, pub_agent, status name), in offset order
    sent_statuses_up_to: int = -1  # statuses up to here were sent and may be purged

    def clear_offset(self, pub_agent: str) -> int:
        """Packages of ``pub_agent`` up to this offset were cleared (-1: none)."""
        return max(self.clear_offsets.get(pub_agent, -1), self.clear_offsets.get(EVERY_AGENT, -1))


class Store(Protocol):
    location: str
    state: StoreState | None
    # Commits since this process last checkpointed the store (``checkpoint``).
    commits_since_checkpoint: int

    def open(self) -> StoreState:
        """Create the store if needed and load its state."""

    def begin(self) -> ChangeSet:
        """A unit of work against the content the store holds now."""

    def commit(self, changes: ChangeSet) -> None:
        """Apply a unit of work: content, offset and statuses in one atomic commit."""

    def record_offset(self, offset: int, reason: str) -> None:
        """Commit a processed offset with no content change (start position)."""

    def record_clear(self, offset: int, pub_agent: str) -> int:
        """Persist the clear offset of ``pub_agent`` = max(old, new); returns the one in force."""

    def forget_statuses(self, up_to_offset: int) -> None:
        """Remove sent statuses (offset <= up_to_offset) and superseded offset rows."""

    def checkpoint(self) -> None:
        """Compact the store's log so readers replay less (a no-op where there is none)."""

    def nodes(self, root: str = "/", *, deep: bool = True) -> list[StoredNode]:
        """The nodes at and below ``root`` (``deep``), or ``root`` and its children."""

    def node(self, path: str) -> StoredNode | None: ...
