"""The subscriber's content store: one Delta Lake table (local path or s3a://) holding the
current content tree and the subscriber's bookkeeping, written through Spark.

Exactly once: a batch's content changes, its new processed offset and its pending statuses are
written by ONE Delta commit. A crash at any instant leaves the old content with the old
offset, or the new content with the new offset; a restart reads the offset back from the
table, so nothing committed is imported again. A commit that fails with an error may still
have landed (the error came after Delta wrote it): the store then reads the committed offset
back before anyone retries the batch. The offset lives in the table, so a copy of the table
resumes where the copy was made.

One writer: a claimed store's writes carry a Delta transaction id that fences out earlier
writers inside the commit (subscriber/writer/guard.py).

Every import commit is a plain append: the batch's node versions, one scope row per package
root (what the package replaced) and its bookkeeping. Updates and deletes rewrite no file when
they are imported, so they cost what new pages cost, and the store needs to know nothing of
what it holds to import (no path index: opening reads only bookkeeping). Reads take the current
tree (subscriber.store.current_tree); ``fold`` later deletes the versions scopes cover, in idle
time.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from contextlib import AbstractContextManager
from typing import Any

from runtime.clock import now_ms
from subscriber.errors import WriterDeposed
from subscriber.maintenance import compaction, delta_table, rewrites
from subscriber.maintenance.fold_worker import FoldWorker
from subscriber.maintenance.sessions import MAINTENANCE_SESSION_CONF, STORE_SESSION_CONF
from subscriber.spark import MAINTENANCE_POOL, POOL_PROPERTY, STARTING_POOL
from subscriber.store import current_tree
from subscriber.store.base import EVERY_AGENT, FileStats, PendingStatus, StepOutcome, StoreState
from subscriber.store.changes import ChangeSet, status_name
from subscriber.store.commits import ObservedCommits
from subscriber.store.rows import (
    COLUMNS,
    KIND_CLEAR,
    KIND_META,
    KIND_OFFSET,
    KIND_PAUSE,
    KIND_SCOPE,
    KIND_SEQUENCE,
    KIND_STATUS,
    PAUSED,
    RESUMED,
    SEQUENCE_CLEAR,
    SEQUENCE_COMMAND,
    SEQUENCE_PACKAGE,
    StoredNode,
    bookkeeping_row,
    node_row,
    rows_frame,
    rows_selected,
    scope_row,
)
from subscriber.writer.guard import WriterGuard

log = logging.getLogger(__name__)

# Delta writes a checkpoint in the committing thread every ``delta.checkpointInterval`` commits
# (default 10), and every package behind it waits for it (the commit that checkpoints set the
# p99 of a paced stream). The
# maintenance thread checkpoints instead (``checkpoint``, every IDLE_CHECKPOINT_COMMITS commits);
# Delta's own interval is only a backstop for a store whose maintenance cannot run. Tables the
# store creates or finds without the property get it.
CHECKPOINT_INTERVAL = 1000
CHECKPOINT_PROPERTY = "delta.checkpointInterval"

# The table is not partitioned: node rows and bookkeeping rows share files, told apart by the
# ``kind`` column (and its file statistics). Partitioned by kind, every commit wrote a file per
# kind it touched and replacing commits were slower.

# Below this many rows a commit is written by one task: one file instead of one per core, and
# no task to schedule for an empty slice. Large batches keep the parallel write.
SINGLE_TASK_ROWS = 1000


BOOKKEEPING_KINDS = (
    f"('{KIND_OFFSET}', '{KIND_CLEAR}', '{KIND_STATUS}', '{KIND_META}', '{KIND_SEQUENCE}', "
    f"'{KIND_PAUSE}')"
)


class DeltaStore:
    def __init__(self, spark: Any, location: str, fold_worker: FoldWorker | None = None) -> None:
        """``fold_worker``: the process that computes this store's folds and compactions and
        writes its checkpoints (none: its own maintenance session does)."""
        self.spark = spark
        self.location = location
        self.fold_worker = fold_worker
        for key, value in STORE_SESSION_CONF.items():
            spark.conf.set(key, value)
        self.state: StoreState | None = None
        # Commits since this process last checkpointed the table (``checkpoint``).
        self.commits_since_checkpoint = 0
        self._counts = threading.Lock()  # guards that count and ``state.scopes`` (_count)
        # Held by every commit of this process's imports and by a fold's commit: the two never
        # race for one version. A fold that lost the race to an import made it retry against the
        # fold's commit, several times an import's own commit time.
        # It tells the read model each commit's version (subscriber.store.commits).
        self.commit_lock = ObservedCommits(lambda: delta_table.latest_version(spark, location))
        self.guard = WriterGuard(spark, location)
        self._maintenance_spark: Any = None
        self._pause_rows = 0  # the highest pause row's number (0: none)

    def _count(self, commits: int, scopes: int = 0) -> None:
        """Add to the commits towards the next checkpoint and to the scopes not yet folded: the
        import thread and the maintenance thread both change them (``+=`` is not atomic)."""
        with self._counts:
            self.commits_since_checkpoint += commits
            if scopes and self.state is not None:
                self.state.scopes = max(0, self.state.scopes + scopes)

    # ------------------------------------------------------------------ the writer guard
    def claim(self, epoch: int, owner: str) -> None:
        """Make ``epoch`` the table's writer epoch (creating the table if needed): the claim's
        transaction id fences out every write of an earlier epoch (WriterGuard). The writer
        row records who claimed it."""
        created = not self.exists()
        key = f"writer@{self.location}"
        row = (KIND_META, key, *([None] * 8), json.dumps({"owner": owner, "epoch": epoch}))
        self.guard.start_epoch(epoch)
        self._write(
            [(*row, now_ms())],
            user_metadata={"writer": owner, "epoch": epoch},
            replace_where=None if created else rows_selected({KIND_META: {key}}),
            options={CHECKPOINT_PROPERTY: str(CHECKPOINT_INTERVAL)} if created else None,
        )
        log.info("content store %s claimed by %s (writer epoch %d)", self.location, owner, epoch)

    def writer_epoch(self) -> int:
        """The highest writer epoch a claim recorded in the table (0: none, or no table). A
        clone carries its source's claims, under the source's location."""
        if not self.exists():
            return 0
        rows = (
            self.spark.read.format("delta")
            .load(self.location)
            .where(f"kind = '{KIND_META}' AND path LIKE 'writer@%'")
            .select("info")
            .collect()
        )
        return max((int(json.loads(row.info)["epoch"]) for row in rows), default=0)

    # ------------------------------------------------------------------ lifecycle
    def exists(self) -> bool:
        """True when a Delta table is at the location."""
        from delta.tables import DeltaTable

        return bool(DeltaTable.isDeltaTable(self.spark, self.location))

    def open(self) -> StoreState:
        """Create the table if needed; load its bookkeeping (and count its scope rows)."""
        meta_key = f"instance@{self.location}"
        books: list[Any] = []
        created = not self.exists()
        if not created:
            table = self.spark.read.format("delta").load(self.location)
            books = (
                # An IN list, not NOT IN: file statistics skip the files of content rows.
                table.where(f"kind IN {BOOKKEEPING_KINDS}")
                .select("kind", "path", "offset", "pub_agent", "status", "info")
                .collect()
            )
            scopes = table.where(f"kind = '{KIND_SCOPE}'").count()
            self._default_checkpoint_interval()
        else:
            scopes = 0
        offsets = [r["offset"] for r in books if r["kind"] == KIND_OFFSET]
        clears: dict[str, int] = {}
        for r in books:
            if r["kind"] == KIND_CLEAR:
                agent = r["pub_agent"] or EVERY_AGENT
                clears[agent] = max(clears.get(agent, -1), r["offset"])
        statuses = sorted(
            PendingStatus(r["offset"], r["pub_agent"], r["status"], _number(r["info"]))
            for r in books
            if r["kind"] == KIND_STATUS
        )
        sequences: dict[str, dict[str, int]] = {
            SEQUENCE_PACKAGE: {},
            SEQUENCE_COMMAND: {},
            SEQUENCE_CLEAR: {},
        }
        for r in books:
            if r["kind"] == KIND_SEQUENCE and r["info"] in sequences:
                by_agent = sequences[r["info"]]
                by_agent[r["pub_agent"]] = max(by_agent.get(r["pub_agent"], 0), r["offset"])
        pauses = [(r["offset"], r["info"]) for r in books if r["kind"] == KIND_PAUSE]
        self._pause_rows, pause = max(pauses, default=(0, RESUMED))
        instance = next(
            (r["info"] for r in books if r["kind"] == KIND_META and r["path"] == meta_key), None
        )
        if instance is None:
            # A new table, or a copy at a new location: a new subscriber instance. A new table
            # is created by this first append (one commit).
            instance = uuid.uuid4().hex
            row = (KIND_META, meta_key, *([None] * 8), instance, now_ms())
            self._write(
                [row],
                user_metadata={"instance": instance},
                options={CHECKPOINT_PROPERTY: str(CHECKPOINT_INTERVAL)} if created else None,
            )
            if created:
                log.info("created content store %s", self.location)
        self.state = StoreState(
            instance_id=instance,
            offset=max(offsets) if offsets else None,
            clear_offsets=clears,
            pending_statuses=statuses,
            scopes=scopes,
            sequences=sequences[SEQUENCE_PACKAGE],
            command_sequences=sequences[SEQUENCE_COMMAND],
            clear_sequences=sequences[SEQUENCE_CLEAR],
            paused=pause == PAUSED,
        )
        self.commit_lock.opened()
        log.info(
            "content store %s: instance %s, offset %s, clear %s, %d pending statuses, %d scopes",
            self.location,
            instance,
            self.state.offset,
            clears,
            len(statuses),
            scopes,
        )
        return self.state

    def begin(self) -> ChangeSet:
        return ChangeSet()

    # ------------------------------------------------------------------ writes
    def _write(
        self,
        rows: list[tuple[Any, ...]],
        *,
        user_metadata: dict[str, object] | None = None,
        replace_where: str | None = None,
        options: dict[str, str] | None = None,
        changes: ChangeSet | None = None,
        offset: int | None = None,
    ) -> None:
        """Write rows in one commit: appended, or replacing the rows ``replace_where`` selects
        (the written rows need not match it, see STORE_SESSION_CONF). ``options`` go to the
        writer (``delta.*`` ones become table properties when the write creates the table).
        ``changes`` and ``offset``: the content and processed offset the rows commit, for the
        commit lock's listener."""
        frame = rows_frame(self.spark, rows)
        if len(rows) < SINGLE_TASK_ROWS:
            frame = frame.coalesce(1)
        writer = frame.write.format("delta")
        if replace_where is None:
            writer = writer.mode("append")
        else:
            writer = writer.mode("overwrite").option("replaceWhere", replace_where)
        if user_metadata is not None:
            writer = writer.option("userMetadata", json.dumps(user_metadata))
        for key, value in (options or {}).items():
            writer = writer.option(key, value)
        with self.commit_lock.content(changes, offset):
            self.guard.save(writer)
        self._count(1)

    def _default_checkpoint_interval(self) -> None:
        """Give a table without a checkpoint interval the store's (a table made elsewhere); an
        interval its owner chose is left as it is."""
        from delta.tables import DeltaTable

        detail = DeltaTable.forPath(self.spark, self.location).detail().first()
        chosen = None if detail is None else (detail["properties"] or {}).get(CHECKPOINT_PROPERTY)
        if chosen is not None:
            return
        self.spark.sql(
            f"ALTER TABLE delta.`{self.location.replace('`', '``')}` "
            f"SET TBLPROPERTIES ('{CHECKPOINT_PROPERTY}' = '{CHECKPOINT_INTERVAL}')"
        )
        log.info(
            "content store %s: checkpoint interval set to %d", self.location, CHECKPOINT_INTERVAL
        )

    def checkpoint(self) -> None:
        """Write a Delta checkpoint of the table's latest version (delta_table.checkpoint):
        by the fold worker when the store has one and it is free (out of the imports' JVM: in
        it, a checkpoint of the million-node store delayed the imports beside it to 2-3 times
        their median), else in the store's maintenance session."""
        counted = self.commits_since_checkpoint
        try:
            worker = self.fold_worker
            if worker is None or not worker.checkpoint(self.location):
                with self._maintaining() as spark:
                    delta_table.checkpoint(spark, self.location)
        finally:
            # Also after a failure: the next try comes after as many commits again. Imports
            # committed meanwhile (it runs beside them) count towards the next one.
            self._count(-counted)

    def commit(self, changes: ChangeSet) -> None:
        """Apply a batch: node versions, scopes, offset and statuses in one appending commit."""
        assert self.state is not None, "open() the store first"
        now = now_ms()
        last = changes.units[-1]
        pkg_ids = {u.offset: u.pkg_id for u in changes.units}
        rows: list[tuple[Any, ...]] = [
            node_row(node, *changes.node_offsets[path], last.pub_agent, now)
            for path, node in changes.upserts.items()
        ]
        rows.extend(
            scope_row(s.path, s.deep, s.offset, pkg_ids[s.offset], last.pub_agent, now)
            for s in changes.scopes
        )
        statuses = [
            PendingStatus(off, agent, status_name(st), n) for off, agent, st, n in changes.statuses
        ]
        books = [
            bookkeeping_row(
                KIND_OFFSET, last.offset, now, pub_agent=last.pub_agent, pkg_id=last.pkg_id
            ),
            *(
                bookkeeping_row(
                    KIND_STATUS,
                    s.offset,
                    now,
                    pub_agent=s.pub_agent,
                    status=s.status,
                    info=str(s.sequence) if s.sequence else None,
                )
                for s in statuses
            ),
            *(
                bookkeeping_row(KIND_SEQUENCE, n, now, pub_agent=agent, info=SEQUENCE_PACKAGE)
                for agent, n in changes.sequences.items()
            ),
        ]
        try:
            self._write(
                [*rows, *books],
                user_metadata=changes.summary(),
                changes=changes,
                offset=last.offset,
            )
        except WriterDeposed:
            raise
        except Exception:
            if self.committed_offset() != last.offset:
                raise
            log.warning(
                "commit of offsets %d..%d reported an error but is in the table",
                changes.first_offset,
                last.offset,
                exc_info=True,
            )
        self.state.offset = last.offset
        self.state.pending_statuses.extend(statuses)
        self._count(0, len(changes.scopes))
        for agent, number in changes.sequences.items():
            self.state.sequences[agent] = max(self.state.sequences.get(agent, 0), number)

    def committed_offset(self) -> int | None:
        """The processed offset in the table (None before the first one)."""
        row = (
            self.spark.read.format("delta")
            .load(self.location)
            .where(f"kind = '{KIND_OFFSET}'")
            .agg({"offset": "max"})
            .first()
        )
        return None if row is None else row[0]

    def record_offset(self, offset: int, reason: str) -> None:
        """Commit a processed offset with no content change (start position, skips)."""
        assert self.state is not None, "open() the store first"
        self._write(
            [bookkeeping_row(KIND_OFFSET, offset, now_ms(), info=reason)],
            user_metadata={"offsets": [offset, offset], "reason": reason},
            offset=offset,
        )
        self.state.offset = offset

    def record_clear(
        self, offset: int, pub_agent: str, sequence: int = 0, up_to_sequence: int = 0
    ) -> int:
        """Persist a clear of ``pub_agent``'s packages (offset and number, each max(old, new))
        and the clear command's own number, in one commit (Store.record_clear)."""
        assert self.state is not None, "open() the store first"
        now = now_ms()
        rows = []
        if offset > self.state.clear_offset(pub_agent):
            rows.append(bookkeeping_row(KIND_CLEAR, offset, now, pub_agent=pub_agent))
        numbers = (
            (SEQUENCE_COMMAND, sequence, self.state.command_sequences),
            (SEQUENCE_CLEAR, up_to_sequence, self.state.clear_sequences),
        )
        raised = [(info, n, held) for info, n, held in numbers if n > held.get(pub_agent, 0)]
        rows.extend(
            bookkeeping_row(KIND_SEQUENCE, n, now, pub_agent=pub_agent, info=info)
            for info, n, _ in raised
        )
        if not rows:
            return self.state.clear_offset(pub_agent)
        self._write(
            rows,
            user_metadata={
                "clear": offset,
                "pub_agent": pub_agent,
                "sequence": sequence,
                "up_to_sequence": up_to_sequence,
            },
        )
        self.state.clear_offsets[pub_agent] = max(
            offset, self.state.clear_offsets.get(pub_agent, -1)
        )
        for _, n, held in raised:
            held[pub_agent] = n
        return self.state.clear_offset(pub_agent)

    def record_pause(self, paused: bool, pub_agent: str, sequence: int) -> None:
        """Append a pause row (numbered above the last) and the command's sequence row in one
        commit."""
        assert self.state is not None, "open() the store first"
        now = now_ms()
        number = self._pause_rows + 1
        rows = [bookkeeping_row(KIND_PAUSE, number, now, info=PAUSED if paused else RESUMED)]
        if sequence > self.state.command_sequences.get(pub_agent, 0):
            rows.append(
                bookkeeping_row(
                    KIND_SEQUENCE, sequence, now, pub_agent=pub_agent, info=SEQUENCE_COMMAND
                )
            )
        self._write(rows, user_metadata={"paused": paused, "pub_agent": pub_agent})
        self._pause_rows = number
        self.state.paused = paused
        if sequence:
            self.state.command_sequences[pub_agent] = max(
                sequence, self.state.command_sequences.get(pub_agent, 0)
            )

    def forget_statuses(self, up_to_offset: int) -> None:
        """Remove sent statuses (offset <= up_to_offset) and superseded offset rows.

        One commit replaces every offset row with the current one, written to a file of its
        own: the files the purge rewrote then hold no offset row, and no later purge (which
        rewrites only files holding a row it removes) reads them again. Deleting only the
        superseded rows left the current one in the purge's output, which the next purge
        rewrote along with the new files: one file growing with every purge."""
        assert self.state is not None, "open() the store first"
        statuses = f"(kind = '{KIND_STATUS}' AND offset <= {int(up_to_offset)})"
        current = self.state.offset
        kept: list[Any] = []
        if current is not None:
            table = self.spark.read.format("delta").load(self.location)
            kept = table.where(f"kind = '{KIND_OFFSET}' AND offset = {int(current)}").collect()
        if kept:
            # The sequence rows are reduced the same way: the current number per agent stays.
            now = now_ms()
            numbers = [
                bookkeeping_row(KIND_SEQUENCE, n, now, pub_agent=agent, info=info)
                for info, by_agent in (
                    (SEQUENCE_PACKAGE, self.state.sequences),
                    (SEQUENCE_COMMAND, self.state.command_sequences),
                    (SEQUENCE_CLEAR, self.state.clear_sequences),
                )
                for agent, n in by_agent.items()
            ]
            self._write(
                [tuple(kept[0][c] for c in COLUMNS), *numbers],
                replace_where=f"{statuses} OR kind IN ('{KIND_OFFSET}', '{KIND_SEQUENCE}')",
                user_metadata={"purge": {"statuses_up_to": up_to_offset, "offset": current}},
            )
        else:  # no offset row to keep (none stored yet): delete what is superseded
            from delta.tables import DeltaTable

            floor = -1 if current is None else int(current)
            with self.commit_lock:
                DeltaTable.forPath(self.spark, self.location).delete(
                    f"{statuses} OR (kind = '{KIND_OFFSET}' AND offset < {floor})"
                )
            self._count(1)
        self.state.pending_statuses = [
            s for s in self.state.pending_statuses if s[0] > up_to_offset
        ]

    def fold(self, max_scopes: int) -> StepOutcome:
        """Fold the oldest scopes (subscriber.maintenance.rewrites): computed by the fold worker
        when the store has one, else in its maintenance session; committed here."""
        assert self.state is not None, "open() the store first"
        with self._maintaining() as spark:
            if self.fold_worker is not None:
                plan = self.fold_worker.plan(self.location, max_scopes)
            else:
                plan = rewrites.plan(spark, self.location, max_scopes)
            outcome = rewrites.commit(spark, self.location, plan, self.commit_lock)
        # Imports may have added scopes meanwhile (the fold runs beside them): only what it
        # removed is taken off.
        self._count(1, -plan.scopes)
        return outcome

    # ------------------------------------------------------------------ maintenance
    # subscriber.maintenance.delta_table does the work; each call is one Delta operation.
    @property
    def maintenance_spark(self) -> Any:
        """The session of the maintenance steps: the store's Spark context, its own SQL
        settings (MAINTENANCE_SESSION_CONF)."""
        if self._maintenance_spark is None:
            session = self.spark.newSession()
            for key, value in {**STORE_SESSION_CONF, **MAINTENANCE_SESSION_CONF}.items():
                session.conf.set(key, value)
            self._maintenance_spark = session
        return self._maintenance_spark

    def _maintaining(self) -> AbstractContextManager[Any]:
        """The maintenance session, as the thread's active one for the block (whichever thread
        runs the step: the maintenance thread, a test, ``scd content maintain``)."""
        return delta_table.active_session(self.maintenance_spark)

    def in_maintenance_thread(self) -> None:
        """Spark jobs of this thread go to the maintenance scheduler pool: an import's tasks
        take the next free core instead of waiting behind a fold's (subscriber/spark.py)."""
        self.spark.sparkContext.setLocalProperty(POOL_PROPERTY, MAINTENANCE_POOL)

    def in_import_thread(self, starting: bool) -> None:
        """Spark jobs of this thread go to the pool of starting agents while ``starting``,
        else to the imports' (subscriber/spark_pools.xml)."""
        self.spark.sparkContext.setLocalProperty(POOL_PROPERTY, STARTING_POOL if starting else None)

    def file_stats(self) -> FileStats:
        return delta_table.file_stats(self.spark, self.location)

    def compact(self, target_file_bytes: int, min_files: int = 2) -> StepOutcome | None:
        """Merge the small files (subscriber.maintenance.compaction): planned by the fold worker
        when the store has one, else in its maintenance session; committed here. The plan counts the
        small files too (listing them is a Spark job over the table's state)."""
        with self._maintaining() as spark:
            if self.fold_worker is not None:
                plan = self.fold_worker.compaction(self.location, target_file_bytes, min_files)
            else:
                plan = compaction.plan(spark, self.location, target_file_bytes, min_files)
            if not plan.rewritten:
                return None
            outcome = rewrites.commit(
                spark, self.location, plan, self.commit_lock, rewrites.COMPACT
            )
        self._count(1)
        return outcome

    def vacuum(self) -> StepOutcome:
        """VACUUM (delta_table.vacuum): by the fold worker when the store has one, else in
        its maintenance session."""
        if self.fold_worker is not None:
            return self.fold_worker.vacuum(self.location)
        with self._maintaining() as spark:
            return delta_table.vacuum(spark, self.location)

    def set_retention(self, retention_s: float, log_retention_s: float) -> bool:
        with self._maintaining() as spark:
            changed = delta_table.set_retention(
                spark, self.location, retention_s, log_retention_s, self.commit_lock
            )
        self._count(int(changed))
        return changed

    # ------------------------------------------------------------------ reads
    def nodes(self, root: str = "/", *, deep: bool = True) -> list[StoredNode]:
        return current_tree.nodes(self.spark, self.location, root, deep=deep)

    def node(self, path: str) -> StoredNode | None:
        return current_tree.node(self.spark, self.location, path)

    def history(self) -> list[dict[str, Any]]:
        """Commits, oldest first: version, operation and the metadata the import recorded."""
        from delta.tables import DeltaTable

        rows = (
            DeltaTable.forPath(self.spark, self.location)
            .history()
            .select("version", "operation", "userMetadata")
            .collect()
        )
        return sorted(
            (
                {
                    "version": r["version"],
                    "operation": r["operation"],
                    "metadata": json.loads(r["userMetadata"]) if r["userMetadata"] else None,
                }
                for r in rows
            ),
            key=lambda c: c["version"],
        )


def _number(info: str | None) -> int:
    """The sequence number a status row keeps in ``info`` (none in rows written before it)."""
    return int(info) if info is not None and info.isdigit() else 0
