"""An agent's read model: the current tree of its store in an on-disk index
(subscriber.reads.index), always the tree of one table version, never a stale one.

* Built at start from the table itself (``source``: delta-rs for a Delta store, no JVM).
* Kept current from what each commit of the store wrote: the store's commit lock tells it
  each commit's version and ChangeSet (subscriber.store.commits); the model applies them in
  its own thread, so neither an import nor a read ever waits for the other.
* Rebuilt, and reads refused (503) meanwhile, when the table changed under it: a commit
  whose version is not the next one (another writer, a clone or a restore came in between),
  a write whose outcome is unknown, the store opened again (a standby taking over), or, while
  idle, a version on the table this process did not make (``latest``, polled).
* Never older than what it served: a rebuild that finds a lower processed offset than one
  already answered is refused until the imports pass it again.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from runtime.errors import ConfigError
from subscriber.errors import Unavailable
from subscriber.reads.delta_tree import TreeSnapshot
from subscriber.reads.index import Reading, TreeIndex
from subscriber.store.changes import ChangeSet
from subscriber.store.commits import UNKNOWN_VERSION, ObservedCommits

log = logging.getLogger(__name__)

# How often an idle model looks for versions of the table it was not told about, and how
# soon it looks again when a commit in flight kept it from it after the store opened.
WATCH_S = 1.0
CHECK_S = 0.05
# After a failed build, the longest wait before the next try (the table may not exist yet,
# be in the middle of a copy, or be unreachable for a while).
RETRY_S = 5.0

T = TypeVar("T")


@dataclass(frozen=True)
class Answer(Generic[T]):
    value: T
    processed: int | None  # the processed offset the answer reflects
    version: int  # the table version it reflects


@dataclass
class Build:
    """The last build: how long it took and what it loaded."""

    seconds: float = 0.0
    nodes: int = 0
    version: int = -1


_Event = tuple[str, int, ChangeSet | None, int | None]  # (what, version, changes, offset)


class ReadModel:
    def __init__(
        self,
        name: str,
        source: Callable[[], TreeSnapshot],
        latest: Callable[[], int],
        commits: ObservedCommits,
        workdir: Path | None = None,
        gate: Callable[[], str | None] = lambda: None,
    ) -> None:
        """``source``: the current tree at the table's latest version; ``latest``: that
        version alone; ``commits``: the store's commit lock (the model listens to it);
        ``workdir``: where the index files go (None: a temporary directory, removed on stop);
        ``gate``: a reason not to answer at all (a standby), or None."""
        self.name = name
        self._source = source
        self._latest = latest
        self._commits = commits
        self._workdir = workdir
        self._own_workdir: Path | None = None
        self._gate = gate
        self._events: queue.SimpleQueue[_Event] = queue.SimpleQueue()
        self._index: TreeIndex | None = None
        self._refused: str | None = "the read model is being built"
        self._stale = True
        # The store opened (a start, a standby taking over): nothing is served until the
        # table's latest version was compared with the model's.
        self._check_pending = False
        self._at: int | None = None  # the table version the index reflects
        self._served = -1  # the highest processed offset answered
        self._served_lock = threading.Lock()
        self._applied = threading.Condition()
        self._files = itertools.count()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_build = Build()
        # Epoch seconds of the first moment a read could be answered (readiness waits for it).
        self.serving_since: float | None = None
        commits.listener = self

    # ------------------------------------------------------------------ the store's listener
    def opened(self) -> None:
        self._events.put(("opened", UNKNOWN_VERSION, None, None))

    def committed(self, version: int, changes: ChangeSet | None, offset: int | None) -> None:
        self._events.put(("commit", version, changes, offset))

    def failed(self, version: int) -> None:
        self._events.put(("failed", version, None, None))

    # ------------------------------------------------------------------ the model's thread
    def start(self) -> ReadModel:
        if self._workdir is None:
            self._workdir = self._own_workdir = Path(tempfile.mkdtemp(prefix="scd-reads-"))
        else:
            try:
                self._workdir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"the read index directory {self._workdir}: {exc}") from exc
        self._thread = threading.Thread(
            target=self.run, name=f"{self.name}-read-model", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._events.put(("stop", UNKNOWN_VERSION, None, None))
        if self._thread is not None:
            self._thread.join()
        self._retire("the subscriber is stopping")
        self._commits.listener = None
        if self._own_workdir is not None:
            shutil.rmtree(self._own_workdir, ignore_errors=True)

    def run(self) -> None:
        while not self._stop.is_set():
            if self._stale and not self._rebuild():
                # Again after RETRY_S, or at the store's next write (a new table's first).
                with contextlib.suppress(queue.Empty):
                    self._events.get(timeout=RETRY_S)
                continue
            if self._check_pending:
                self._watch()
            try:
                event = self._events.get(timeout=CHECK_S if self._check_pending else WATCH_S)
            except queue.Empty:
                if self._gate() is None:  # a standby's table is another's to write
                    self._watch()
                continue
            self._handle(event)

    def _handle(self, event: _Event) -> None:
        what, version, changes, offset = event
        index = self._index
        if what == "stop" or index is None:
            return
        if what == "opened":
            self._check_pending = True
            return
        current = self._at if self._at is not None else self.last_build.version
        if what == "commit" and version == current + 1:
            index.apply(changes, version, offset)
            self._set_version(version)
        elif what in ("commit", "failed") and 0 <= version <= current:
            return  # already in what the model was built from, or nothing landed
        else:
            self._mark_stale(
                f"the store changed under the read model ({what} at version {version})"
            )

    def _watch(self) -> None:
        """A version this process did not make: another writer (checked between two of this
        process's writes only, none in flight, every reported one applied)."""
        generation = self._commits.generation
        if generation % 2 or self._index is None:
            return  # a commit in flight: next time
        try:
            latest = self._latest()
        except Exception as exc:  # unreachable for a while: keep serving what it knows
            log.debug("%s: the store's version could not be read: %s", self.name, exc)
            return
        current = self._at
        if (
            current is not None
            and latest > current
            and generation == self._commits.generation
            and self._events.empty()
        ):
            self._mark_stale(f"version {latest} of the store was written by another process")
        if generation == self._commits.generation and self._events.empty():
            with self._applied:
                self._check_pending = False
                self._applied.notify_all()
            self._note_serving()

    def _mark_stale(self, reason: str) -> None:
        log.warning("%s: %s: rebuilding the read model", self.name, reason)
        self._stale = True
        self._retire(reason)

    def _retire(self, reason: str) -> None:
        self._refused = reason
        old, self._index = self._index, None
        if old is not None:
            old.close()

    def _rebuild(self) -> bool:
        """Build a new index from the table's latest version; False (logged) if it failed."""
        self._retire("the read model is being built")
        started = time.monotonic()
        assert self._workdir is not None, "start() first"
        index: TreeIndex | None = None
        try:
            index = TreeIndex(self._workdir / f"{self.name}-{next(self._files)}.sqlite")
            snapshot = self._source()
            nodes = index.load(snapshot.nodes, snapshot.version, snapshot.processed)
        except Exception as exc:
            if index is not None:
                index.close()
            self._refused = f"the read model could not be built: {exc}"
            log.warning("%s: the read model could not be built: %s", self.name, exc)
            return False
        self.last_build = Build(time.monotonic() - started, nodes, snapshot.version)
        self._stale = False
        self._index = index
        self._set_version(snapshot.version)
        self._refused = None
        log.info(
            "%s: read model of %d nodes at version %d (offset %s) built in %.1f s",
            self.name,
            nodes,
            snapshot.version,
            snapshot.processed,
            self.last_build.seconds,
        )
        return True

    # ------------------------------------------------------------------ versions
    def _set_version(self, version: int) -> None:
        with self._applied:
            self._at = version
            self._applied.notify_all()
        self._note_serving()

    def _note_serving(self) -> None:
        if self.serving_since is None and self._refusal() is None:
            self.serving_since = time.time()

    def refusal(self) -> str | None:
        """Why no read could be answered yet since the start; None once one could (a later
        rebuild does not take a ready subscriber out of service: reads say why they wait),
        and None for a model not started (an agent driven by hand serves no reads)."""
        if self._thread is None:
            return None
        if self.serving_since is None:
            self._note_serving()
        return None if self.serving_since is not None else self._refusal()

    def _refusal(self) -> str | None:
        """Why a read would not be answered now (None: it would)."""
        if self._index is None or self._refused is not None:
            return self._refused or "the read model is being built"
        if self._check_pending:
            return "the store opened: the read model is checking its version"
        return self._gate()

    def wait_version(self, version: int, timeout_s: float) -> bool:
        """Wait until the model answers from table ``version`` (or a later one)."""

        def answers() -> bool:
            at = self._at
            ready = self._index is not None and not self._check_pending
            return ready and at is not None and at >= version

        with self._applied:
            return self._applied.wait_for(answers, timeout_s)

    # ------------------------------------------------------------------ reads (any thread)
    def read(self, what: Callable[[Reading], T]) -> Answer[T]:
        """``what`` of one commit's tree; Unavailable when there is none to answer from."""
        gated = self._gate()
        if gated is not None:
            raise Unavailable(gated)
        index = self._index
        refused = self._refusal()
        if index is None or refused is not None:
            raise Unavailable(refused or "the read model is being built")
        try:
            with index.reading() as reading:
                processed = -1 if reading.processed is None else reading.processed
                with self._served_lock:
                    if processed < self._served:
                        raise Unavailable(
                            f"the store's offset went back to {processed} below {self._served} "
                            "already served: waiting for the imports to pass it"
                        )
                    self._served = processed
                return Answer(what(reading), reading.processed, reading.version)
        except Unavailable:
            raise
        except Exception as exc:  # the index was retired under this read (a rebuild)
            if index is self._index:
                raise
            raise Unavailable("the read model is being rebuilt") from exc
