"""Whether this subscriber process writes its store (active) or waits (standby).

Two processes started on one store both run: the one that holds the writer lease
(subscriber.writer.lease) imports, the other is a hot standby: Spark started, nothing read
from the store, the lease read every ``renew_s``. It takes over once the active process
stopped renewing for the lease's ttl (or released it on a clean stop), claims the store with
the next epoch and imports from the store's offset.

The lease thread (``run``) renews or tries to take the lease; the import thread asks
``active`` before it writes and calls ``step_down`` when the store refused a write
(``WriterDeposed``). Every change of role is one log line and counted
(``scd_store_writer_role``, ``scd_store_writer_role_changes_total``). Without a lease (tests,
tools) the process is the store's only writer, unchecked.
"""

from __future__ import annotations

import logging
import threading
from enum import StrEnum

from subscriber.errors import LeaseError
from subscriber.metrics import SubscriberMetrics
from subscriber.writer.lease import WriterLease

log = logging.getLogger(__name__)


class Role(StrEnum):
    ACTIVE = "active"
    STANDBY = "standby"


class WriterRole:
    def __init__(
        self,
        name: str,
        location: str,
        lease: WriterLease | None,
        metrics: SubscriberMetrics,
        stop: threading.Event,
    ) -> None:
        self.name = name
        self.location = location
        self.lease = lease
        self.metrics = metrics
        self.stop = stop
        self._lock = threading.Lock()
        self.role: Role | None = None  # None until the lease was first read
        self.changes = 0
        if lease is None:
            self._change(Role.ACTIVE, "no writer lease: the only writer of this store")

    # ------------------------------------------------------------------ the import thread's view
    @property
    def active(self) -> bool:
        """True while this process may write the store."""
        return self.lease is None or self.lease.held

    @property
    def epoch(self) -> int | None:
        """The writer epoch to claim the store with (None: no lease, or not held)."""
        return None if self.lease is None else self.lease.epoch

    @property
    def owner(self) -> str:
        return "" if self.lease is None else self.lease.owner

    def raise_epoch(self, claimed: int, epoch: int) -> bool:
        """Hold the lease with ``epoch`` instead of ``claimed`` (the store holds claims up to
        ``epoch - 1``, which this lease never handed out); False when it is no longer held."""
        with self._lock:
            lease = self.lease
            if lease is None or lease.epoch != claimed or not lease.raise_epoch(epoch):
                return False
        log.warning(
            "%s: writer epoch raised from %d to %d: the store holds claims of epoch %d, which "
            "its lease %s never handed out (a clone of another store, or a deleted lease)",
            self.name,
            claimed,
            epoch,
            epoch - 1,
            lease.where,
        )
        return True

    def step_down(self, reason: str) -> None:
        """The store refused a write of this process, or its lease lapsed: stop writing."""
        with self._lock:
            if self.lease is not None:
                self.lease.drop()
            self._change(Role.STANDBY, reason)

    # ------------------------------------------------------------------ the lease thread
    def run(self) -> None:
        """Renew or try to take the lease every ``renew_s`` until the agent stops."""
        assert self.lease is not None, "no lease to keep"
        while not self.stop.is_set():
            self.tick()
            self.stop.wait(self.lease.renew_s)

    def tick(self) -> None:
        """One lease step: renew while holding it, else try to take it. A lease object that
        cannot be read or written is retried at the next step; a holder steps down once its
        lease lapsed meanwhile."""
        lease = self.lease
        if lease is None:
            return
        with self._lock:
            try:
                if lease.epoch is not None:
                    if not lease.renew():
                        self._change(Role.STANDBY, "the writer lease was taken by another process")
                elif lease.try_acquire():
                    self._change(Role.ACTIVE, f"took the writer lease (epoch {lease.epoch})")
                elif self.role is None:
                    self._change(Role.STANDBY, self._held_by())
            except (LeaseError, OSError) as exc:
                log.warning(
                    "%s: writer lease %s: %s (retrying in %.0f s)",
                    self.name,
                    lease.where,
                    exc,
                    lease.renew_s,
                )
                if lease.epoch is not None and not lease.held:
                    lease.drop()
                    self._change(Role.STANDBY, "the writer lease lapsed: it could not be renewed")

    def release(self) -> None:
        """Clean stop: give the lease up so a standby takes over at once."""
        if self.lease is None:
            return
        with self._lock:
            try:
                self.lease.release()
            except (LeaseError, OSError) as exc:
                log.warning("%s: writer lease not released (it expires): %s", self.name, exc)

    # ------------------------------------------------------------------ health
    def describe(self) -> str:
        """The role for /health and /ready: the epoch, or who writes the store."""
        if self.active:
            epoch = self.epoch
            return "active" if epoch is None else f"active (writer epoch {epoch})"
        return f"standby: {self._held_by()}"

    def _held_by(self) -> str:
        holder = None if self.lease is None else self.lease.holder
        if holder is None or not holder.owner:
            return f"store {self.location} has no active writer yet"
        return f"store {self.location} is written by {holder.owner} (epoch {holder.epoch})"

    def _change(self, role: Role, reason: str) -> None:
        if role == self.role:
            return
        self.role = role
        self.changes += 1
        self.metrics.writer_role_changed(role == Role.ACTIVE, str(role))
        level = logging.INFO if role == Role.ACTIVE or self.changes == 1 else logging.WARNING
        log.log(level, "%s: writer role %s on %s: %s", self.name, role, self.location, reason)
