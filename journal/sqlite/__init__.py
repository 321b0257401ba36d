"""The embedded backend of the journal: one SQLite file (WAL) shared by the processes of a
machine, for ``scd demo`` and the fast tests.

Public interface: :class:`SqliteJournal`. Inside: ``journal`` (topics, records, fenced writes),
``leadership`` (leader election by ``flock``).
"""

from journal.sqlite.journal import SqliteJournal

__all__ = ["SqliteJournal"]
