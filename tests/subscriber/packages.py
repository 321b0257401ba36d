"""Builders of content packages and package messages for subscriber tests."""

from __future__ import annotations

from collections.abc import Iterable

from journal.content.package import (
    FILE_DATA,
    FILE_TYPE,
    NODE_TYPE,
    Binary,
    ContentPackage,
    FilterRoot,
    Node,
)
from journal.wire import messages as m
from subscriber.store.changes import ChangeSet, Unit


def node(path: str, **props: str | int | bytes) -> Node:
    n = Node(path=path)
    for key, val in props.items():
        if isinstance(val, bytes):
            n.properties[key].binary_value.CopyFrom(Binary(inline=val, content_type="text/plain"))
        elif isinstance(val, int):
            n.properties[key].long_value = val
        else:
            n.properties[key].string_value = val
    return n


def file_node(path: str, data: bytes) -> Node:
    n = Node(path=path)
    n.properties[NODE_TYPE].string_value = FILE_TYPE
    n.properties[FILE_DATA].binary_value.CopyFrom(Binary(inline=data))
    return n


def package(
    pkg_id: str,
    req: int,
    roots: list[tuple[str, bool]],
    nodes: list[Node] = (),  # type: ignore[assignment]
) -> ContentPackage:
    return ContentPackage(
        package_id=pkg_id,
        req_type=req,  # type: ignore[arg-type]
        roots=[FilterRoot(path=p, deep=d) for p, d in roots],
        nodes=list(nodes),
    )


def unit(
    offset: int, pkg: ContentPackage, *, status: int | None = None, agent: str = "publish"
) -> Unit:
    return Unit(offset, agent, pkg.package_id, pkg.req_type, pkg, status)


def add(offset: int, root: str, *nodes: Node, deep: bool = True) -> Unit:
    return unit(offset, package(f"p{offset}", m.ReqType.ADD, [(root, deep)], list(nodes)))


def delete(offset: int, root: str, deep: bool = True) -> Unit:
    return unit(offset, package(f"p{offset}", m.ReqType.DELETE, [(root, deep)]))


def new_change_set(units: Iterable[Unit] = ()) -> ChangeSet:
    """A ChangeSet of these units, as the import loop builds one batch by batch."""
    changes = ChangeSet()
    for unit in units:
        changes.add(unit)
    return changes
