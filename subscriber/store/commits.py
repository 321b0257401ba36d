"""The store's commit lock, which also tells a listener (the read model, subscriber.reads)
about every commit the store made, with the table version it made.

Every write of a store's process holds its commit lock (imports, bookkeeping, folds,
compactions, retention changes), so the version read as the lock is released is the one that
write made: a listener that knows the version it reflects sees at once whether a commit it was
not told about came in between (another process, a clone, a restore). An import's commit
(``content``) hands over its ChangeSet; every other write changes no content: a fold or a
compaction keeps the current tree as it was by its own contract.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Protocol

from subscriber.store.changes import ChangeSet

log = logging.getLogger(__name__)

# The version a listener is told when it could not be read: it knows nothing for sure.
UNKNOWN_VERSION = -1


class CommitListener(Protocol):
    def opened(self) -> None:
        """The store was (re)opened: what it holds may be anything."""

    def committed(self, version: int, changes: ChangeSet | None, offset: int | None) -> None:
        """The store's commit made table ``version``; ``changes`` are its content changes
        (None: none), ``offset`` the processed offset it recorded (None: unchanged)."""

    def failed(self, version: int) -> None:
        """A write raised, or its version could not be read; the table is at ``version`` now
        (UNKNOWN_VERSION: not known), and the write may have landed all the same."""


class ObservedCommits:
    """A lock held by each commit of one store; ``version`` reads the table's latest version
    as this process knows it (called only with a listener, under the lock)."""

    def __init__(self, version: Callable[[], int]) -> None:
        self._lock = threading.Lock()
        self._version = version
        self.listener: CommitListener | None = None
        # Odd while a write is in flight: a listener polling the table for commits of others
        # (subscriber.reads.model) knows that a version it finds may still be this one's.
        self.generation = 0

    def __enter__(self) -> None:
        self._lock.acquire()
        self.generation += 1

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._finish(None, None, exc is None)

    @contextmanager
    def content(self, changes: ChangeSet | None, offset: int | None) -> Iterator[None]:
        """Hold the lock for a commit of ``changes`` recording ``offset``."""
        self.__enter__()
        ok = False
        try:
            yield
            ok = True
        finally:
            self._finish(changes, offset, ok)

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """Hold the lock, reporting nothing: a reader that must see no commit half done."""
        with self._lock:
            yield

    def opened(self) -> None:
        if self.listener is not None:
            self.listener.opened()

    def _finish(self, changes: ChangeSet | None, offset: int | None, ok: bool) -> None:
        try:
            listener = self.listener
            if listener is None:
                return
            try:
                version = self._version()
            except Exception:  # the write's outcome stands; the listener starts over
                log.warning("the store's version after a write is unknown", exc_info=True)
                listener.failed(UNKNOWN_VERSION)
                return
            if ok:
                listener.committed(version, changes, offset)
            else:
                listener.failed(version)
        finally:
            self.generation += 1
            self._lock.release()
