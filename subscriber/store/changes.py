"""The net effect of a batch of packages, computed in order before any Spark work: the node
versions it writes, the scopes it replaces, the bookkeeping it records.

Semantics of one package (FileVault's filter "replace" mode for deep roots):
* ADD, deep root r: the subtree at r becomes exactly the package's nodes under r (nodes below
  r that the package does not carry are removed); shallow root: the node is upserted.
* DELETE, deep root r: r and everything below it are removed; shallow root: the node only.
* TEST and INVALIDATE change no content; every package advances the offset.

Every root of an ADD or DELETE is a ``Scope``: from its package's offset on, the stored
versions it covers are no longer current, and the package's own nodes are. A store applies a
change set without knowing what it holds: it drops (or masks) what the scopes cover and adds
the nodes. Within a batch the scopes are already applied to the batch's earlier nodes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from journal.content.filevault import Unmodelled
from journal.content.package import ContentPackage, Node
from journal.content.rules import is_within
from journal.wire.messages import ReqType, Status


@dataclass(frozen=True, slots=True)
class Unit:
    """One package to apply (or to skip) at one offset."""

    offset: int
    pub_agent: str
    pkg_id: str
    req_type: int  # ReqType
    package: ContentPackage | None = None  # None: skipped (not for us, cleared or failed)
    status: int | None = None  # Status to report for this offset, if any
    created_ms: int = 0
    sequence: int = 0  # the record's sequence number, applied with it (0: not numbered)
    unmodelled: Unmodelled | None = None  # what the package holds that scd does not import


@dataclass(frozen=True, slots=True)
class Scope:
    """The paths one package root replaces, from the package's offset on: the root, and with
    ``deep`` everything below it."""

    path: str
    deep: bool
    offset: int

    def covers(self, path: str, offset: int) -> bool:
        """True when the version of ``path`` written at ``offset`` is replaced by this scope."""
        if offset >= self.offset:
            return False
        return is_within(path, self.path) if self.deep else path == self.path


@dataclass
class ChangeSet:
    """Accumulates units in offset order."""

    upserts: dict[str, Node] = field(default_factory=dict)
    node_offsets: dict[str, tuple[int, str]] = field(default_factory=dict)
    scopes: list[Scope] = field(default_factory=list)
    statuses: list[tuple[int, str, int, int]] = field(default_factory=list)  # + sequence
    units: list[Unit] = field(default_factory=list)
    # Highest sequence number per publisher agent among the units (journal/sequence.py).
    sequences: dict[str, int] = field(default_factory=dict)
    # Each path at or above an upserted node -> the upserted nodes at or below it.
    _below: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set), repr=False)

    @property
    def last_offset(self) -> int:
        return self.units[-1].offset

    @property
    def first_offset(self) -> int:
        return self.units[0].offset

    def add(self, unit: Unit) -> None:
        if self.units and unit.offset <= self.units[-1].offset:
            raise ValueError(f"offset {unit.offset} after {self.units[-1].offset}: not in order")
        if unit.package is not None:
            self._apply(unit, unit.package)
        if unit.status is not None:
            self.statuses.append((unit.offset, unit.pub_agent, unit.status, unit.sequence))
        if unit.sequence > self.sequences.get(unit.pub_agent, 0):
            self.sequences[unit.pub_agent] = unit.sequence
        self.units.append(unit)

    def _apply(self, unit: Unit, package: ContentPackage) -> None:
        """``package`` passed the content rules (journal/content/rules.py): canonical paths, an
        ADD's nodes within its roots. The batch's earlier nodes a root covers go (they all have
        smaller offsets); ``_below`` finds those under a deep root without a scan."""
        if unit.req_type not in (ReqType.ADD, ReqType.DELETE):
            return
        for root in package.roots:
            self.scopes.append(Scope(root.path, root.deep, unit.offset))
            covered = self._below.get(root.path, set()) if root.deep else {root.path}
            for path in list(covered):
                if self.upserts.pop(path, None) is not None:
                    del self.node_offsets[path]
                    for place in _places(path):
                        self._below[place].discard(path)
        if unit.req_type == ReqType.ADD:
            for node in package.nodes:
                self.upserts[node.path] = node
                self.node_offsets[node.path] = (unit.offset, unit.pkg_id)
                for place in _places(node.path):
                    self._below[place].add(node.path)

    def summary(self) -> dict[str, object]:
        return {
            "offsets": [self.first_offset, self.last_offset],
            "packages": [u.pkg_id for u in self.units if u.package is not None],
            "upserts": len(self.upserts),
            "scopes": len(self.scopes),
        }


def _places(path: str) -> list[str]:
    """``path`` and every path above it, root first: where a scope covering it can be."""
    if path == "/":
        return ["/"]
    parts = path.split("/")
    return ["/", *("/".join(parts[: i + 1]) for i in range(1, len(parts)))]


def status_name(status: int) -> str:
    return str(Status.Name(status))
