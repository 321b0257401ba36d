"""Leader election among the members of one group, behind the journal API
(``Journal.leadership``): exactly one member leads; another takes over when it dies.

No home-made consensus: on Kafka, group membership on a one-partition coordination topic
(journal/kafka/leadership.py); on the embedded SQLite backend, an exclusive ``flock`` on a file
beside the database (journal/sqlite/leadership.py).

Handover is safe: losing leadership waits for the leader job in progress to finish
(``jobs_lock``) before the member rejoins, so the next leader never overlaps with it.
"""

from __future__ import annotations

import abc
import logging
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from runtime.supervisor import SupervisedThread

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Election:
    """What the members of one election agree on."""

    name: str  # the group; on Kafka the consumer group id
    topic: str  # Kafka's coordination topic (the embedded backend needs none)
    session_timeout_s: float  # Kafka: a dead member is evicted after this long
    retry_s: float  # embedded backend: how often a follower retries the lock
    thread_name: str  # the supervised thread that holds the membership


Listener = Callable[[bool], None]

# A change of role runs in the thread that keeps the member in the election: one that takes
# longer than this is logged with where it waits, since meanwhile no other member can lead.
SLOW_ROLE_CHANGE_S = 10.0


class Leadership(abc.ABC):
    """Membership in one election (``Journal.leadership``): ``is_leader`` while this member
    leads; ``jobs_lock`` is held around each leader-only job and around every change of role,
    so a member that loses leadership finishes the job in progress before another can lead."""

    def __init__(self, thread_name: str) -> None:
        self.thread_name = thread_name
        self.jobs_lock = threading.Lock()
        self._leader = False
        self._listener: Listener | None = None
        self._stop = threading.Event()
        self.thread: SupervisedThread | None = None

    @property
    def is_leader(self) -> bool:
        return self._leader

    def start(self, listener: Listener | None = None) -> Leadership:
        self._listener = listener
        # Supervised: each _run releases leadership on the way out (its finally), so a restart
        # after a failure competes for it again from scratch.
        self.thread = SupervisedThread(self.thread_name, self._run, stop=self._stop).start()
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self.thread is not None:
            self.thread.join(timeout_s)
        self._set(False)

    def _set(self, leader: bool) -> None:
        with self.jobs_lock:
            if leader == self._leader:
                return
            self._leader = leader
            log.info("%s leadership (%s)", "took" if leader else "gave up", self.thread_name)
            if self._listener is None:
                return
            watchdog = threading.Timer(
                SLOW_ROLE_CHANGE_S, _report_slow, (self.thread_name, threading.get_ident())
            )
            watchdog.daemon = True
            watchdog.start()
            try:
                self._listener(leader)
            finally:
                watchdog.cancel()

    @abc.abstractmethod
    def _run(self) -> None: ...


def _report_slow(name: str, ident: int) -> None:
    frame = sys._current_frames().get(ident)
    where = "".join(traceback.format_stack(frame)) if frame is not None else "(thread gone)"
    log.warning(
        "%s: a change of role has taken over %s s, at:\n%s", name, SLOW_ROLE_CHANGE_S, where
    )
