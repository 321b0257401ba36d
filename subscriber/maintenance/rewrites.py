"""Rewrites of a store table's files that change no content, planned in one step and committed
in another: the fold (``plan``) deletes the node versions that the oldest scopes cover, and
those scopes, so that the table stays close to its current tree (subscriber.store.current_tree)
while reads and the table get smaller; the compaction (subscriber.maintenance.compaction) merges
small files. ``plan`` computes and writes the new files (the work: CPU for seconds to minutes),
``commit`` commits them under the store's lock (hundredths of a second). The plan may be
computed in another process (subscriber.maintenance.fold_worker); the commit is always the store's
own, the one writer of the table.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from runtime.clock import now_ms
from subscriber.errors import RewriteConflict
from subscriber.store.base import StepOutcome
from subscriber.store.current_tree import folded_rows_sql
from subscriber.store.rows import KIND_SCOPE
from subscriber.store.scope_ranges import FileRanges, covered, files_meeting


@dataclass(frozen=True)
class RewritePlan:
    """What a fold or a compaction computed from one version of the table, to be committed
    (``commit``): the files it wrote and those they replace, as Delta's JSON actions, and the
    names of the replaced files (for the conflict check). It crosses a process boundary when
    a fold worker computes it (subscriber.maintenance.fold_worker)."""

    version: int
    # The last version checked for commits that conflict with it (``check_since``; its
    # commit checks only those after): the version the plan read, or a later one.
    checked: int
    files_before: int
    scopes: int  # scopes it folds (a compaction: none)
    added: int
    rewritten: tuple[str, ...]  # names of the files it replaces
    actions: tuple[str, ...]  # AddFile and RemoveFile actions, Delta's JSON

    @classmethod
    def from_dict(cls, raw: object) -> RewritePlan:
        """A plan from ``dataclasses.asdict`` (decoded JSON); ValueError for anything else."""
        if not isinstance(raw, dict) or set(raw) != {f.name for f in dataclasses.fields(cls)}:
            raise ValueError("a rewrite plan has exactly the fields of RewritePlan")
        counts = ("version", "checked", "files_before", "scopes", "added")
        for key in counts:
            value = raw[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"a rewrite plan's {key} is an integer >= 0")
        if raw["checked"] < raw["version"]:
            raise ValueError("a rewrite plan's checked version is not before the one it read")
        lists = [raw["rewritten"], raw["actions"]]
        if not all(isinstance(v, list) and all(isinstance(i, str) for i in v) for v in lists):
            raise ValueError("a rewrite plan's files and actions are lists of strings")
        return cls(
            raw["version"],
            raw["checked"],
            raw["files_before"],
            raw["scopes"],
            raw["added"],
            tuple(raw["rewritten"]),
            tuple(raw["actions"]),
        )


def plan(spark: Any, location: str, max_scopes: int) -> RewritePlan:
    """Fold the oldest scopes (about ``max_scopes``: all of the offsets they belong to) of the
    table's latest version: write its files without the node versions those scopes cover and
    without the scopes, and return them with the files they replace, uncommitted.

    The fold reads one version of the table and rewrites the files of that version that hold a
    row it deletes; appends committed meanwhile are neither read nor touched. It reads only the
    files that can hold a row it deletes, by their path and parent statistics
    (subscriber.store.scope_ranges): its cost follows what it folds, not the table's size (a
    fold of 200 scopes on a million-node store read every file, twice). The files it writes are
    ``dataChange = false`` (like OPTIMIZE): the current tree is the same.

    ``spark`` must be the thread's active session (delta_table.active_session)."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as func

    jvm = spark.sparkContext._jvm
    delta_log, txn, version = transaction(spark, location)
    snapshot = txn.snapshot()
    table = spark.read.format("delta").option("versionAsOf", version).load(location)
    before = int(snapshot.numOfFiles())
    folding = _oldest_scopes(table, max_scopes)
    if not folding:
        return RewritePlan(version, version, before, 0, 0, (), ())
    up_to = max(scope.offset for scope in folding)
    candidates = _files_to_fold(spark, snapshot, folding)
    view = f"scd_fold_{version}"
    rows = DataFrame(
        delta_log.createDataFrame(
            snapshot, scala_list(jvm, candidates), False, jvm.scala.Option.empty()
        ),
        spark,
    )
    rows.createOrReplaceTempView(view)
    keys = ["kind", "path", "offset"]
    folded = spark.sql(folded_rows_sql(view, up_to)).persist()
    try:
        # Cached first, the rows to delete have a known size: when it is below Spark's broadcast
        # threshold, the joins below broadcast them and each is one scan of one task. As a
        # sort-merge join, the two scans ran at once on both of local[2]'s task slots, and an
        # import's task waited for one to finish (the million-node store). The count of its
        # scopes is the action that fills the cache.
        scopes_folded = folded.where(f"kind = '{KIND_SCOPE}'").count()
        located = rows.select("*", func.col("_metadata.file_path").alias(_FILE))
        holding = located.join(folded, keys, "left_semi").select(_FILE).distinct()
        touched = [r[_FILE] for r in holding.collect()]
        names = {file_name(p) for p in touched}
        removed = [f for f in candidates if file_name(f.path()) in names]
        kept = (
            located.where(func.col(_FILE).isin(touched))
            .join(folded, keys, "left_anti")
            .select(*table.columns)
        )
        written = seq_list(txn.writeFiles(kept._jdf))
    finally:
        folded.unpersist()
        spark.catalog.dropTempView(view)
    now = now_ms()
    actions = [without_data_change(add).json() for add in written]
    actions += [add.removeWithTimestamp(now, False).json() for add in removed]
    checked = check_since(delta_log, version, names)
    return RewritePlan(
        version,
        checked,
        before,
        int(scopes_folded),
        len(written),
        tuple(sorted(names)),
        tuple(actions),
    )


def transaction(spark: Any, location: str) -> tuple[Any, Any, int]:
    """A Delta transaction on the table's latest version (JVM gateway), which a plan reads that
    version through and writes its files with: the table's DeltaLog, the transaction and the
    version."""
    jvm = spark.sparkContext._jvm
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, location)
    txn = delta_log.startTransaction()
    return delta_log, txn, int(txn.readVersion())


# The rewrites: their names in a commit's user metadata, and the fold worker's steps.
FOLD, COMPACT = "fold", "compact"


def commit(
    spark: Any,
    location: str,
    rewrite: RewritePlan,
    commit_lock: AbstractContextManager[Any],
    step: str = FOLD,
) -> StepOutcome:
    """Commit ``rewrite``, a plan of ``step`` (FOLD or COMPACT; nothing when it replaces no
    file). Like OPTIMIZE it changes no content, so Delta checks it with snapshot isolation and
    a concurrent append cannot fail it (with a MERGE, the table's Serializable isolation failed
    the fold beside every import). A commit since the plan's version that removed one of the
    files it replaces, or changed the table's schema or protocol, makes it fail
    (RewriteConflict). ``commit_lock`` (the store's) is held while it commits, so that it does
    not race this process's imports for a version.

    Committed as a MANUAL UPDATE from the version it read, the fold held the lock for
    0.4-1.0 s while every package due waited: Delta checked each commit that landed since that
    version, and rebuilt the table's whole state for the new snapshot and its checksum (it
    derives those from the last version's for every operation but MANUAL UPDATE). So the
    rewrite checks those commits itself (``check_since``): the plan those that landed while
    it was computed (in the fold worker when the store has one: after a fold of a minute on the
    million-node store, some 250 commits and 0.6 s of the store's process), the commit those
    since, mostly before it takes the lock. It commits through a transaction started under the
    lock, at the latest version: a fold as a DELETE, a compaction as an OPTIMIZE (what the
    table's history then says). That commit takes what an import's takes. It carries no writer
    id: a deposed writer's fold deletes only what stays covered. There is no public API for
    such a commit; it goes through Delta's OptimisticTransaction (JVM gateway).

    ``spark`` must be the thread's active session (delta_table.active_session)."""
    before = rewrite.files_before
    if not rewrite.rewritten:
        return StepOutcome(before, before)
    jvm = spark.sparkContext._jvm
    delta = jvm.org.apache.spark.sql.delta
    delta_log = delta.DeltaLog.forTable(spark._jsparkSession, location)
    parse = delta.actions.Action.fromJson
    actions = scala_list(jvm, [parse(action) for action in rewrite.actions])
    names = set(rewrite.rewritten)
    none = scala_list(jvm, [])
    if step == COMPACT:  # no predicate, no Z-order, not auto, no clustering, not full
        operation = getattr(delta, "DeltaOperations$Optimize")(
            none, none, False, jvm.scala.Option.empty(), False
        )
    else:  # a DELETE without a predicate
        operation = getattr(delta, "DeltaOperations$Delete")(none)
    checked = check_since(delta_log, rewrite.checked, names)
    with commit_lock, _commit_settings(spark, {step: {"read_version": rewrite.version}}):
        latest = delta_log.startTransaction()
        # The commits since the check above (another process's too: Delta checks those that
        # land after this transaction started).
        check_since(delta_log, checked, names)
        latest.commit(actions, operation)
    return StepOutcome(before, before - len(names) + rewrite.added)


def _files_to_fold(spark: Any, snapshot: Any, folding: list[_Scope]) -> list[Any]:
    """The files (AddFile) of ``snapshot`` that can hold a row the fold deletes: those of the
    scopes ``folding``, and those whose statistics allow a node these cover (scope_ranges)."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as func

    def stat(field: str) -> Any:
        return func.get_json_object("stats", f"$.{field}")

    columns = [
        stat(f"{bound}Values.{column}")
        for column in ("kind", "path", "parent")
        for bound in ("min", "max")
    ]
    rows = DataFrame(snapshot.allFiles().toDF(), spark).select("path", *columns).collect()
    stats = [FileRanges(r[0], (r[1], r[2]), (r[3], r[4]), (r[5], r[6])) for r in rows]
    where = covered((scope.path, scope.deep) for scope in folding)
    scope_files = {scope.file for scope in folding}
    chosen = set(files_meeting(stats, where)) | {
        r[0] for r in rows if file_name(r[0]) in scope_files
    }
    return list(snapshot.allFiles().where(func.col("path").isin(list(chosen))._jc).collectAsList())


@dataclass(frozen=True)
class _Scope:
    """A scope row the fold removes: its offset, path, whether deep, and its file's name."""

    offset: int
    path: str
    deep: bool
    file: str


def _oldest_scopes(table: Any, max_scopes: int) -> list[_Scope]:
    """The oldest scopes of ``table`` (about ``max_scopes``: all of the offsets they belong
    to)."""
    from pyspark.sql import functions as func

    scopes = table.where(f"kind = '{KIND_SCOPE}'").select(
        "offset", "path", "info", func.col("_metadata.file_path")
    )
    oldest = scopes.orderBy("offset").limit(max_scopes).collect()
    if oldest and len(oldest) == max_scopes:  # the last offset's other scopes too
        last = int(oldest[-1]["offset"])
        oldest = [r for r in oldest if r["offset"] < last]
        oldest += scopes.where(f"offset = {last}").collect()
    return [_Scope(int(r[0]), str(r[1]), r[2] == "deep", file_name(r[3])) for r in oldest]


# Actions of a commit after the plan's version that invalidate the files it wrote.
_TABLE_ACTIONS = ("Metadata", "Protocol")


def check_since(delta_log: Any, version: int, names: set[str]) -> int:
    """The last version of the table; RewriteConflict when a commit after ``version`` removed a
    file named in ``names`` or changed the table's metadata or protocol."""
    last = version
    changes = delta_log.getChanges(version + 1, True)  # True: a missing version raises
    while changes.hasNext():
        committed = changes.next()
        last = int(committed._1())
        for action in seq_list(committed._2()):
            kind = action.getClass().getSimpleName()
            if kind in _TABLE_ACTIONS:
                raise RewriteConflict(f"version {last} changed the table ({kind}) meanwhile")
            if kind == "RemoveFile" and file_name(action.path()) in names:
                raise RewriteConflict(
                    f"version {last} removed {file_name(action.path())}, which the plan replaces"
                )
    return last


_HISTORY_METRICS = "spark.databricks.delta.history.metricsEnabled"
_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


@contextmanager
def _commit_settings(spark: Any, metadata: dict[str, object]) -> Iterator[None]:
    """``metadata`` as the user metadata of the commit (the step and the version it read, for
    the history), and no history metrics (Delta takes a DELETE's or an OPTIMIZE's from the SQL
    metrics of its own command, which a rewrite has none of)."""
    spark.conf.set(_HISTORY_METRICS, "false")
    spark.conf.set(_USER_METADATA, json.dumps(metadata))
    try:
        yield
    finally:
        spark.conf.unset(_HISTORY_METRICS)
        spark.conf.unset(_USER_METADATA)


_FILE = "_scd_file"
# dataChange's place among AddFile's fields (path, partitionValues, size, modificationTime, ...).
_DATA_CHANGE = 4


def file_name(path: str) -> str:
    """A data file's name: Delta names each file uniquely (part-...-<uuid>...), whether the log
    holds it relative to the table or as an absolute URI."""
    return str(path).rsplit("/", 1)[-1]


def seq_list(scala_seq: Any) -> list[Any]:
    """A Scala Seq from the JVM gateway as a Python list."""
    iterator = scala_seq.iterator()
    items = []
    while iterator.hasNext():
        items.append(iterator.next())
    return items


def scala_list(jvm: Any, items: list[Any]) -> Any:
    """A Scala List (immutable Seq) of ``items``, for the JVM gateway."""
    values = jvm.java.util.ArrayList()
    for item in items:
        values.add(item)
    return jvm.scala.jdk.javaapi.CollectionConverters.asScala(values).toList()


def without_data_change(add: Any) -> Any:
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
