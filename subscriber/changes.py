"""The net effect of a batch of packages on the content tree, computed in order, before any
Spark work: which nodes to upsert, which existing nodes to delete, which bookkeeping to record.

Semantics of one package (FileVault's filter "replace" mode for deep roots):
* ADD, deep root r: the subtree at r becomes exactly the package's nodes under r (nodes below
  r that the package does not carry are removed); shallow root: the node is upserted.
* DELETE, deep root r: r and everything below it are removed; shallow root: the node only.
* TEST and INVALIDATE change no content; every package advances the offset.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass, field

from journal.wire.messages import ReqType, Status
from journal.wire.package import ContentPackage, Node
from journal.wire.rules import is_within


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


@dataclass
class ChangeSet:
    """Accumulates units in offset order against the set of paths the store holds."""

    existing: Set[str]
    upserts: dict[str, Node] = field(default_factory=dict)
    node_offsets: dict[str, tuple[int, str]] = field(default_factory=dict)
    deletes: set[str] = field(default_factory=set)
    statuses: list[tuple[int, str, int]] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)

    @property
    def last_offset(self) -> int:
        return self.units[-1].offset

    @property
    def first_offset(self) -> int:
        return self.units[0].offset

    @property
    def inserts_only(self) -> bool:
        """True when the batch only creates nodes: it commits as a plain append."""
        return not self.deletes and not any(p in self.existing for p in self.upserts)

    def present(self, path: str) -> bool:
        return path in self.upserts or (path in self.existing and path not in self.deletes)

    def paths_under(self, root: str) -> list[str]:
        found = [p for p in self.existing if is_within(p, root) and p not in self.deletes]
        found.extend(p for p in self.upserts if is_within(p, root) and p not in self.existing)
        return found

    def _delete(self, path: str) -> None:
        self.upserts.pop(path, None)
        self.node_offsets.pop(path, None)
        if path in self.existing:
            self.deletes.add(path)

    def _upsert(self, node: Node, unit: Unit) -> None:
        self.upserts[node.path] = node
        self.node_offsets[node.path] = (unit.offset, unit.pkg_id)
        self.deletes.discard(node.path)

    def add(self, unit: Unit) -> None:
        if self.units and unit.offset <= self.units[-1].offset:
            raise ValueError(f"offset {unit.offset} after {self.units[-1].offset}: not in order")
        if unit.package is not None:
            self._apply(unit, unit.package)
        if unit.status is not None:
            self.statuses.append((unit.offset, unit.pub_agent, unit.status))
        self.units.append(unit)

    def _apply(self, unit: Unit, package: ContentPackage) -> None:
        """``package`` passed the content rules (journal/wire/rules.py): canonical paths, an
        ADD's nodes within its roots."""
        roots = [(r.path, r.deep) for r in package.roots]
        if unit.req_type == ReqType.ADD:
            nodes = package.nodes
            carried = {n.path for n in nodes}
            for root, deep in roots:
                if deep:
                    for path in self.paths_under(root):
                        if path not in carried:
                            self._delete(path)
            for node in nodes:
                self._upsert(node, unit)
        elif unit.req_type == ReqType.DELETE:
            for root, deep in roots:
                for path in self.paths_under(root) if deep else [root]:
                    self._delete(path)

    def summary(self) -> dict[str, object]:
        return {
            "offsets": [self.first_offset, self.last_offset],
            "packages": [u.pkg_id for u in self.units if u.package is not None],
            "upserts": len(self.upserts),
            "deletes": len(self.deletes),
        }


def status_name(status: int) -> str:
    return str(Status.Name(status))


def new_change_set(existing: Set[str], units: Iterable[Unit] = ()) -> ChangeSet:
    changes = ChangeSet(existing)
    for unit in units:
        changes.add(unit)
    return changes
