"""The current content tree of a store table.

A store table holds node versions and scope rows (subscriber.store.rows): the current tree is the
versions that no scope of a later offset covers. ``current_nodes_sql`` is that query (the one
docs/content-store.md documents for Spark users); the store reads with it, and the fold
(subscriber.store.fold) deletes what it leaves out (``folded_rows_sql``).
"""

from __future__ import annotations

from typing import Any

from subscriber.maintenance.delta_table import quoted
from subscriber.store.rows import KIND_NODE, KIND_SCOPE, StoredNode, sql_string


def _versions_sql(
    table: str, where: str, scopes_where: str | None, *, broadcast_scopes: bool = False
) -> str:
    """Common table expressions over a store table: ``nodes`` (the versions of the paths
    ``where`` selects), ``scopes`` (all, or those ``scopes_where`` selects) and ``covered``
    (the versions a scope of a later offset covers). The paths at and above a node (its
    "ancestors or self") are where a scope covering it can be; the equi-join on them keeps the
    query linear in the table's size. ``broadcast_scopes`` joins the scopes, a bounded set, by
    sending them to the nodes' task instead of letting Spark pick a side from estimates."""
    only = "" if scopes_where is None else f" AND ({scopes_where})"
    hint = "/*+ BROADCAST(s) */ " if broadcast_scopes else ""
    return f"""WITH t AS (SELECT * FROM {table}),
nodes AS (SELECT * FROM t WHERE kind = '{KIND_NODE}' AND ({where})),
scopes AS (
  SELECT path AS scope, offset AS scope_offset, info = 'deep' AS deep
  FROM t WHERE kind = '{KIND_SCOPE}'{only}
),
places AS (
  SELECT path, offset, place FROM nodes
  LATERAL VIEW explode(transform(sequence(1, size(split(path, '/'))),
    i -> if(i = 1, '/', array_join(slice(split(path, '/'), 1, i), '/')))) a AS place
),
covered AS (
  SELECT {hint}DISTINCT p.path, p.offset FROM places p
  JOIN scopes s ON s.scope = p.place AND s.scope_offset > p.offset AND (s.deep OR p.place = p.path)
)
"""


def current_nodes_sql(table: str, where: str = "TRUE") -> str:
    """The current content tree of a store table (``delta.`<location>```), restricted to the
    node paths ``where`` selects: the node versions that no scope of a later offset covers."""
    return (
        _versions_sql(table, where, None)
        + "SELECT n.* FROM nodes n\n"
        + "LEFT ANTI JOIN covered c ON n.path = c.path AND n.offset = c.offset"
    )


def folded_rows_sql(table: str, up_to: int) -> str:
    """The rows (kind, path, offset) a fold of the scopes up to offset ``up_to`` deletes: the
    versions they cover, and those scopes. Later scopes keep covering what they cover. The
    scopes are the fold's (about its ``max_scopes``), so they are broadcast: over the few files
    a fold reads, Spark's estimates made it broadcast the nodes' places instead (a million of
    them ran the driver out of memory)."""
    return (
        _versions_sql(table, "TRUE", f"offset <= {int(up_to)}", broadcast_scopes=True)
        + f"SELECT '{KIND_NODE}' AS kind, path, offset FROM covered\n"
        + f"UNION SELECT '{KIND_SCOPE}' AS kind, scope AS path, scope_offset AS offset FROM scopes"
    )


def paths_selected(path: str, *, deep: bool) -> str:
    """A predicate on ``path``: ``path`` itself, and with ``deep`` everything below it (a path
    range, which file statistics skip on)."""
    if not deep:
        return f"path = {sql_string(path)}"
    if path == "/":
        return "TRUE"
    return f"(path = {sql_string(path)} OR startswith(path, {sql_string(path + '/')}))"


def _current(spark: Any, location: str, where: str) -> Any:
    """The current versions of the nodes ``where`` selects (a DataFrame)."""
    return spark.sql(current_nodes_sql(quoted(location), where))


def nodes(spark: Any, location: str, root: str = "/", *, deep: bool = True) -> list[StoredNode]:
    """The current nodes at and below ``root`` (``deep``), or ``root`` and its children."""
    where = paths_selected(root, deep=True)
    if not deep:  # the subtree's path range first: file statistics skip on it
        where += f" AND (path = {sql_string(root)} OR parent = {sql_string(root)})"
    rows = _current(spark, location, where).collect()
    return sorted((StoredNode.from_row(r) for r in rows), key=lambda n: n.path)


def node(spark: Any, location: str, path: str) -> StoredNode | None:
    rows = _current(spark, location, paths_selected(path, deep=False)).collect()
    return StoredNode.from_row(rows[0]) if rows else None
