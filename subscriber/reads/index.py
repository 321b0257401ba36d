"""The read model's on-disk index of the current tree: one SQLite file, one row per current
node, and the Delta table version and processed offset it reflects.

One writer (the read model's thread) and any number of readers, each on its own connection:
SQLite's WAL mode gives a reader a snapshot for its whole read transaction while the writer
goes on, so a read sees one commit's state, the meta row included, never half of one. The
file lives only as long as the process (it is rebuilt at start), so nothing is synced to disk.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from subscriber.store.changes import ChangeSet
from subscriber.store.rows import BinaryInfo, StoredNode, parent_and_name, stored_node

# Each connection's page cache (KiB, negative in SQLite's terms): bounds the memory of a
# reader whatever the tree's size, and keeps a million-node index's hot pages in memory.
CACHE_KIB = 16 * 1024
# Rows inserted per statement batch while building: a million nodes stream through.
BUILD_BATCH = 5000
SCHEMA = """
CREATE TABLE nodes (path TEXT PRIMARY KEY, parent TEXT, doc TEXT NOT NULL) WITHOUT ROWID;
CREATE INDEX nodes_parent ON nodes (parent, path);
CREATE TABLE meta (one INTEGER PRIMARY KEY CHECK (one = 1), version INTEGER NOT NULL,
                   processed INTEGER);
"""


def encode(node: StoredNode) -> str:
    binaries = {
        name: [
            b.blob_key,
            b.size,
            b.sha256,
            b.content_type,
            None if b.data is None else base64.b64encode(b.data).decode("ascii"),
        ]
        for name, b in node.binaries.items()
    }
    return json.dumps(
        {"p": node.properties, "b": binaries, "o": node.offset, "k": node.pkg_id},
        separators=(",", ":"),
    )


def decode(path: str, doc: str) -> StoredNode:
    raw = json.loads(doc)
    properties = {k: (t, bool(m), list(v)) for k, (t, m, v) in raw["p"].items()}
    binaries = {
        name: BinaryInfo(key, size, sha, ctype, None if data is None else base64.b64decode(data))
        for name, (key, size, sha, ctype, data) in raw["b"].items()
    }
    return StoredNode(path, properties, binaries, int(raw["o"]), str(raw["k"]))


def _below(path: str) -> tuple[str, str]:
    """The half-open range of the paths strictly below ``path`` ('0' follows '/')."""
    prefix = "/" if path == "/" else path + "/"
    return prefix, prefix[:-1] + "0"


class TreeIndex:
    """One index file; ``write`` methods from one thread, ``reading`` from any."""

    def __init__(self, file: Path) -> None:
        """A new, empty index at ``file`` (what a stopped process left there is replaced)."""
        self.file = file
        self._remove()
        self._writer = self._connect(write=True)
        self._writer.executescript(SCHEMA)
        # Each reading thread's connection, closed with this object once no read holds it
        # (closing it from another thread while it reads crashes SQLite).
        self._local = threading.local()

    def _connect(self, *, write: bool) -> sqlite3.Connection:
        uri = f"file:{self.file}" + ("" if write else "?mode=ro")
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        if write:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = OFF")
        return conn

    # ------------------------------------------------------------------ writes (one thread)
    def load(self, nodes: Iterable[StoredNode], version: int, processed: int | None) -> int:
        """Fill a new index with the current tree at ``version``; returns the nodes loaded."""
        count = 0
        batch: list[tuple[str, str | None, str]] = []
        with self._transaction() as conn:
            for node in nodes:
                batch.append((node.path, parent_and_name(node.path)[0], encode(node)))
                if len(batch) >= BUILD_BATCH:
                    count += self._insert(conn, batch)
            count += self._insert(conn, batch)
            conn.execute("INSERT INTO meta VALUES (1, ?, ?)", (version, processed))
        return count

    @staticmethod
    def _insert(conn: sqlite3.Connection, batch: list[tuple[str, str | None, str]]) -> int:
        # A path twice (versions no scope told apart): the later offset wins.
        conn.executemany(
            "INSERT INTO nodes VALUES (?, ?, ?) ON CONFLICT (path) DO UPDATE SET doc = "
            "excluded.doc WHERE json_extract(excluded.doc, '$.o') > json_extract(doc, '$.o')",
            batch,
        )
        done = len(batch)
        batch.clear()
        return done

    def apply(self, changes: ChangeSet | None, version: int, processed: int | None) -> None:
        """One commit, atomically: what its scopes replaced goes, its nodes come. Every stored
        version is older than the batch, so every scope covers it (the batch's own nodes the
        scopes cover were dropped by ChangeSet)."""
        with self._transaction() as conn:
            for scope in changes.scopes if changes is not None else ():
                conn.execute("DELETE FROM nodes WHERE path = ?", (scope.path,))
                if scope.deep:
                    conn.execute(
                        "DELETE FROM nodes WHERE path >= ? AND path < ?", _below(scope.path)
                    )
            if changes is not None:
                conn.executemany(
                    "INSERT OR REPLACE INTO nodes VALUES (?, ?, ?)",
                    [
                        (path, parent_and_name(path)[0], encode(stored_node(node, *where)))
                        for path, node in changes.upserts.items()
                        for where in [changes.node_offsets[path]]
                    ],
                )
            conn.execute(
                "UPDATE meta SET version = ?, processed = coalesce(?, processed)",
                (version, processed),
            )

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        conn = self._writer
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # ------------------------------------------------------------------ reads (any thread)
    @contextmanager
    def reading(self) -> Iterator[Reading]:
        """A read transaction: everything read in it is of one commit."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect(write=False)
            self._local.conn = conn
        conn.execute("BEGIN")
        try:
            version, processed = conn.execute("SELECT version, processed FROM meta").fetchone()
            yield Reading(conn, int(version), processed)
        finally:
            conn.execute("COMMIT")

    def close(self) -> None:
        """Close the writer and delete the files: a read still in them finishes, a new one
        fails."""
        self._writer.close()
        self._remove()

    def _remove(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.file}{suffix}").unlink(missing_ok=True)


class Reading:
    """The index as of one commit."""

    def __init__(self, conn: sqlite3.Connection, version: int, processed: int | None) -> None:
        self._conn = conn
        self.version = version
        self.processed = processed  # the processed offset of that commit (None: none yet)

    def node(self, path: str) -> StoredNode | None:
        row = self._conn.execute("SELECT doc FROM nodes WHERE path = ?", (path,)).fetchone()
        return None if row is None else decode(path, row[0])

    def children(self, path: str, after: str, limit: int) -> list[str]:
        """Paths of up to ``limit`` children of ``path`` after the path ``after``, in order."""
        rows = self._conn.execute(
            "SELECT path FROM nodes WHERE parent = ? AND path > ? ORDER BY path LIMIT ?",
            (path, after, limit),
        )
        return [r[0] for r in rows]

    def subtree(self, root: str, after: str, limit: int) -> list[StoredNode]:
        """Up to ``limit`` nodes at and below ``root`` with a path above ``after``, in path
        order, whether or not the nodes between them exist: ``root`` itself, then one range
        of the primary key (a path below ``root`` starts with ``root/``; "/" sorts just
        below "0")."""
        found: list[StoredNode] = []
        base = root.rstrip("/")
        if root != "/" and after < root and (node := self.node(root)) is not None:
            found.append(node)
        rows = self._conn.execute(
            "SELECT path, doc FROM nodes WHERE path >= ? AND path < ? AND path > ? "
            "ORDER BY path LIMIT ?",
            (base + "/", base + "0", after, limit - len(found)),
        )
        found.extend(decode(path, doc) for path, doc in rows)
        return found

    def all_nodes(self) -> Iterator[StoredNode]:
        """Every node in path order (tests and tools compare whole trees)."""
        with closing(self._conn.execute("SELECT path, doc FROM nodes ORDER BY path")) as rows:
            for path, doc in rows:
                yield decode(path, doc)

    def size(self) -> int:
        return int(self._conn.execute("SELECT count(*) FROM nodes").fetchone()[0])
