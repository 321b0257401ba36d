"""The current content tree of a store table, and the fold that keeps the table close to it.

A store table holds node versions and scope rows (subscriber.store.rows): the current tree is the
versions that no scope of a later offset covers. ``current_nodes_sql`` is that query (the one
docs/content-store.md documents for Spark users); the store reads with it, and ``fold`` deletes what
it leaves out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from runtime.clock import now_ms
from subscriber.store.base import StepOutcome
from subscriber.store.delta_maintenance import quoted
from subscriber.store.rows import KIND_NODE, KIND_SCOPE, StoredNode, sql_string


def _versions_sql(table: str, where: str, scopes_where: str | None) -> str:
    """Common table expressions over a store table: ``nodes`` (the versions of the paths
    ``where`` selects), ``scopes`` (all, or those ``scopes_where`` selects) and ``covered``
    (the versions a scope of a later offset covers). The paths at and above a node (its
    "ancestors or self") are where a scope covering it can be; the equi-join on them keeps the
    query linear in the table's size."""
    only = "" if scopes_where is None else f" AND ({scopes_where})"
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
  SELECT DISTINCT p.path, p.offset FROM places p
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
    versions they cover, and those scopes. Later scopes keep covering what they cover."""
    return (
        _versions_sql(table, "TRUE", f"offset <= {int(up_to)}")
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


def fold(
    spark: Any,
    location: str,
    max_scopes: int,
    commit_lock: AbstractContextManager[Any],
) -> tuple[StepOutcome, int]:
    """Delete the node versions the oldest scopes (about ``max_scopes``: all of the offsets
    they belong to) cover, and those scopes, in one commit: the current tree stays the same,
    reads and the table get smaller. Returns the outcome and how many scopes it removed.

    The fold reads one version of the table and rewrites the files of that version that hold
    a row it deletes, without the rows; appends committed meanwhile are neither read nor
    touched. It commits its files with ``dataChange = false`` (like OPTIMIZE): the current
    tree is the same, so Delta checks it with snapshot isolation and a concurrent append
    cannot fail it (with a MERGE, the table's Serializable isolation failed the fold beside
    every import). A concurrent fold or compaction that removed one of its files still makes
    it fail (FoldConflict). ``commit_lock`` (the store's) is held while it commits, so that it
    does not race this process's imports for a version.

    Committed as a MANUAL UPDATE from the version it read, the fold held the lock for
    0.4-1.0 s while every package due waited: Delta checked each commit that landed since that
    version, and rebuilt the table's whole state for the new snapshot and its checksum (it
    derives those from the last version's for every operation but MANUAL UPDATE). So the fold
    checks those commits itself (``_check_since``), mostly before it takes the lock, and commits
    as a DELETE through a transaction started under the lock, at the latest version: that
    commit takes what an import's takes. Like a compaction it changes no content, so it carries
    no writer id: a deposed writer's fold deletes only what stays covered. There is no public
    API for such a commit; it goes through Delta's OptimisticTransaction (JVM gateway)."""
    from pyspark.sql import functions as func

    jvm = spark.sparkContext._jvm
    delta = jvm.org.apache.spark.sql.delta
    delta_log = delta.DeltaLog.forTable(spark._jsparkSession, location)
    txn = delta_log.startTransaction()
    version = int(txn.readVersion())
    at_version = f"{quoted(location)} VERSION AS OF {version}"
    table = spark.read.format("delta").option("versionAsOf", version).load(location)
    columns = table.columns
    scopes = table.where(f"kind = '{KIND_SCOPE}'")
    oldest = scopes.select("offset").orderBy("offset").limit(max_scopes).collect()
    before = int(txn.snapshot().numOfFiles())
    if not oldest:
        return StepOutcome(before, before), 0
    keys = ["kind", "path", "offset"]
    folded = spark.sql(folded_rows_sql(at_version, int(oldest[-1]["offset"]))).persist()
    try:
        # Cached first, the rows to delete have a known size: when it is below Spark's broadcast
        # threshold, the joins below broadcast them and each is one scan of one task. As a
        # sort-merge join, the two scans ran at once on both of local[2]'s task slots, and an
        # import's task waited seconds for one (bench/README.md, the million-node store). The
        # count of its scopes is the action that fills the cache.
        scopes_folded = folded.where(f"kind = '{KIND_SCOPE}'").count()
        rows = table.select("*", func.col("_metadata.file_path").alias(_FILE))
        holding = rows.join(folded, keys, "left_semi").select(_FILE).distinct()
        touched = [r[_FILE] for r in holding.collect()]
        names = {_file_name(p) for p in touched}
        removed = [f for f in txn.snapshot().allFiles().collect() if _file_name(f.path()) in names]
        kept = (
            rows.where(func.col(_FILE).isin(touched))
            .join(folded, keys, "left_anti")
            .select(*columns)
        )
        written = txn.writeFiles(kept._jdf)
    finally:
        folded.unpersist()
    now = now_ms()
    added = _seq(written)
    actions = jvm.java.util.ArrayList()
    for add in added:
        actions.add(_rearranged(add))
    for add in removed:
        actions.add(add.removeWithTimestamp(now, False))
    if removed:
        to_scala = jvm.scala.jdk.javaapi.CollectionConverters.asScala
        seq = to_scala(actions).toList()
        # A DELETE without a predicate: Delta derives the new version's checksum from the last
        # one for it; for a MANUAL UPDATE it rebuilt the table's whole state (0.4 s on 3,000
        # nodes), under the lock.
        delete = getattr(delta, "DeltaOperations$Delete")(
            to_scala(jvm.java.util.ArrayList()).toList()
        )
        checked = _check_since(delta_log, version, names)
        with commit_lock, _fold_commit_session(spark, {"fold": {"read_version": version}}):
            latest = delta_log.startTransaction()
            # The commits since the check above (another process's too: Delta checks those that
            # land after this transaction started).
            _check_since(delta_log, checked, names)
            latest.commit(seq, delete)
    return StepOutcome(before, before - len(removed) + len(added)), int(scopes_folded)


class FoldConflict(RuntimeError):
    """A commit that landed while the fold ran removed a file the fold rewrites, or changed the
    table's schema or protocol: the fold is dropped (the maintenance step fails) and runs again
    when next due. Delta raises its ConcurrentDeleteDeleteException for the same case."""


# Actions of a commit after the fold's version that invalidate the files it wrote.
_TABLE_ACTIONS = ("Metadata", "Protocol")


def _check_since(delta_log: Any, version: int, names: set[str]) -> int:
    """The last version of the table; FoldConflict when a commit after ``version`` removed a
    file named in ``names`` or changed the table's metadata or protocol."""
    last = version
    changes = delta_log.getChanges(version + 1, True)  # True: a missing version raises
    while changes.hasNext():
        committed = changes.next()
        last = int(committed._1())
        for action in _seq(committed._2()):
            kind = action.getClass().getSimpleName()
            if kind in _TABLE_ACTIONS:
                raise FoldConflict(f"version {last} changed the table ({kind}) during the fold")
            if kind == "RemoveFile" and _file_name(action.path()) in names:
                raise FoldConflict(
                    f"version {last} removed {_file_name(action.path())}, which the fold rewrote"
                )
    return last


_HISTORY_METRICS = "spark.databricks.delta.history.metricsEnabled"
_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


@contextmanager
def _fold_commit_session(spark: Any, metadata: dict[str, object]) -> Iterator[None]:
    """Delta reads a commit's settings from the thread's active session: ``spark`` (the
    maintenance session, used by that thread alone) is made it, with ``metadata`` as the
    commit's user metadata (the version the fold read, for its history) and without history
    metrics (Delta takes a DELETE's from the SQL metrics of its own DELETE command, which the
    fold has none of); the thread's previous session is restored after."""
    sessions = spark.sparkContext._jvm.org.apache.spark.sql.SparkSession
    previous = sessions.getActiveSession()
    sessions.setActiveSession(spark._jsparkSession)
    spark.conf.set(_HISTORY_METRICS, "false")
    spark.conf.set(_USER_METADATA, json.dumps(metadata))
    try:
        yield
    finally:
        spark.conf.unset(_HISTORY_METRICS)
        spark.conf.unset(_USER_METADATA)
        if previous.isDefined():
            sessions.setActiveSession(previous.get())
        else:
            sessions.clearActiveSession()


_FILE = "_scd_file"
# dataChange's place among AddFile's fields (path, partitionValues, size, modificationTime, ...).
_DATA_CHANGE = 4


def _file_name(path: str) -> str:
    """A data file's name: Delta names each file uniquely (part-...-<uuid>...), whether the log
    holds it relative to the table or as an absolute URI."""
    return str(path).rsplit("/", 1)[-1]


def _seq(seq: Any) -> list[Any]:
    """A Scala Seq from the JVM gateway as a Python list."""
    iterator = seq.iterator()
    items = []
    while iterator.hasNext():
        items.append(iterator.next())
    return items


def _rearranged(add: Any) -> Any:
    """The AddFile with ``dataChange = false`` and every other field as it is: Scala's
    ``copy`` takes each field, and ``copy$default$N`` returns field N's current value, so this
    holds whatever fields the running Delta version's AddFile has (4.0 has 11; 4.4 adds two)."""
    count = next(
        m for m in add.getClass().getMethods() if m.getName() == "copy"
    ).getParameterCount()
    fields = [getattr(add, f"copy$default${n}")() for n in range(1, count + 1)]
    if fields[_DATA_CHANGE] is not add.dataChange():
        raise RuntimeError(f"AddFile field {_DATA_CHANGE + 1} of {count} is not dataChange")
    fields[_DATA_CHANGE] = False
    return add.copy(*fields)
