"""The embedded backend of the journal: one SQLite file (WAL) shared by the processes of a
machine, for ``scd demo`` and the fast tests, with Kafka's semantics and leader election by
``flock``.

Public interface: :class:`SqliteJournal`.
"""

from journal.sqlite.journal import SqliteJournal

__all__ = ["SqliteJournal"]
