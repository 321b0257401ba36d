"""What a read of ``/content/{path}`` answers: a node as JSON, and with ``depth`` its subtree,
within bounds a hostile request cannot move.

A node: ``path``, ``name``, ``type`` (jcr:primaryType), ``properties`` in the distribute
request's value form (subscriber.content.property_json), each binary as
``{"type": "binary", "size", "sha256", "contentType", "url"}`` (its bytes at ``url``),
``children`` (names, in order), ``offset`` and ``packageId`` of the package that wrote it. With
``depth`` N >= 1, ``nodes`` holds the children's documents to N levels below.

A page of ``/tree/{path}``: the documents (without ``children``) of every node at and below the
path, in path order, a page at a time, whether or not the nodes between them exist: what a
client that lists, copies or mirrors a subtree reads.
"""

from __future__ import annotations

import hashlib
from collections import deque
from urllib.parse import quote

from journal.content import rules
from subscriber.content import JsonValue, node_type, property_json
from subscriber.reads.index import Reading
from subscriber.store.rows import BinaryInfo, StoredNode

# Every answer of a read model names the processed offset and the table version it reflects.
OFFSET_HEADER = "X-Scd-Offset"
VERSION_HEADER = "X-Scd-Table-Version"
MAX_DEPTH = 8  # levels of a subtree below the node read
MAX_NODES = 1000  # documents in one answer, the node read included
MAX_CHILDREN = 1000  # child names listed per node


def binary_sha256(info: BinaryInfo) -> str | None:
    """The sha256 of a binary: its reference's, or computed from inline bytes (bounded by the
    content rules' value length)."""
    if info.sha256:
        return info.sha256
    if info.data is not None:
        return hashlib.sha256(info.data).hexdigest()
    return None


def binary_url(prefix: str, path: str, prop: str) -> str:
    """Where the bytes of ``path``'s binary ``prop`` are served (subscriber.reads.api)."""
    return f"{prefix}/binaries{quote(path)}?property={quote(prop, safe='')}"


def document(
    node: StoredNode, children: list[str] | None, more: bool, prefix: str
) -> dict[str, JsonValue]:
    """A node's document; ``children`` None leaves the child names out (a listing of the
    subtree holds them)."""
    properties: dict[str, JsonValue] = {
        name: property_json(*p) for name, p in node.properties.items()
    }
    for name, info in node.binaries.items():
        properties[name] = {
            "type": "binary",
            "size": info.size,
            "sha256": binary_sha256(info),
            "contentType": info.content_type,
            "url": binary_url(prefix, node.path, name),
        }
    doc: dict[str, JsonValue] = {
        "path": node.path,
        "name": node.path.rpartition("/")[2],
        "type": node_type(node),
        "properties": dict(sorted(properties.items())),
        "offset": node.offset,
        "packageId": node.pkg_id,
    }
    if children is not None:
        doc["children"] = [c.rpartition("/")[2] for c in children]
    if more:
        doc["childrenTruncated"] = True  # more than MAX_CHILDREN
    return doc


def subtree(reading: Reading, path: str, depth: int, prefix: str) -> dict[str, JsonValue] | None:
    """The document of ``path`` with ``depth`` levels of documents below it (breadth first,
    at most MAX_NODES in all: then ``complete`` is false), None when no node is there."""
    top = reading.node(path)
    if top is None:
        return None
    budget = [MAX_NODES]

    def expand(node: StoredNode, levels: int) -> dict[str, JsonValue]:
        budget[0] -= 1
        children = reading.children(node.path, "", MAX_CHILDREN + 1)
        doc = document(node, children[:MAX_CHILDREN], len(children) > MAX_CHILDREN, prefix)
        pending.append((doc, children[:MAX_CHILDREN], levels))
        return doc

    pending: deque[tuple[dict[str, JsonValue], list[str], int]] = deque()
    root = expand(top, depth)
    complete = True
    while pending:
        doc, children, levels = pending.popleft()
        if levels <= 0 or not children:
            continue
        below: dict[str, JsonValue] = {}
        for child in children:
            if budget[0] <= 0:
                complete = False
                break
            node = reading.node(child)
            if node is not None:
                below[child.rpartition("/")[2]] = expand(node, levels - 1)
        doc["nodes"] = below
    root["complete"] = complete
    return root


def tree_page(
    reading: Reading, root: str, after: str, limit: int, shallow: bool, prefix: str
) -> dict[str, JsonValue]:
    """A page of ``/tree/{root}``: the documents (without child names) of up to ``limit``
    nodes at and below ``root`` (``shallow``: ``root`` and its children) after the path
    ``after``, in path order; ``next`` is the ``after`` of the next page, None at the end."""
    if shallow:
        nodes = [n for n in [reading.node(root)] if n is not None and n.path > after]
        paths = reading.children(root, after, limit - len(nodes))
        nodes.extend(n for p in paths if (n := reading.node(p)) is not None)
    else:
        nodes = reading.subtree(root, after, limit)
    return {
        "path": root,
        "nodes": [document(n, None, False, prefix) for n in nodes],
        "next": nodes[-1].path if len(nodes) == limit else None,
    }


def checked_limit(raw: str | None) -> int:
    """``?limit`` of a tree page: 1 to MAX_NODES (the default); ValueError otherwise."""
    return _bounded("limit", raw, 1, MAX_NODES, MAX_NODES, digits=4)


def checked_path(raw: str) -> str:
    """The node path of a request (``""`` is the root); ContentRuleError when the content
    rules refuse it."""
    return rules.check_path(raw or "/", "node path")


def checked_depth(raw: str | None) -> int:
    """``?depth``: 0 to MAX_DEPTH; ValueError otherwise."""
    return _bounded("depth", raw, 0, MAX_DEPTH, 0, digits=3)


def _bounded(name: str, raw: str | None, low: int, high: int, default: int, digits: int) -> int:
    """A query parameter's integer in ``low``..``high`` (``default`` when absent), of at most
    ``digits`` ASCII digits, so a hostile one is never parsed whole; ValueError otherwise."""
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > digits:
        raise ValueError(f"{name} must be an integer from {low} to {high}")
    value = int(raw)
    if not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}")
    return value
