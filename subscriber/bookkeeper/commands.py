"""Commands: what a subscriber accepts from the command topic (clear, pause and resume).

A command is obeyed only when it names this subscriber (agent name and instance id), names a
publisher agent this subscriber follows, carries a valid signature (when keys are configured),
and (a clear) clears no further than the package topic holds. A clear applies to the packages
of the agent it names only, and only an editable subscriber obeys one. A clear that carries a
package sequence number (``ClearCommand.sequence``, journal/sequence.py) covers that agent's
packages numbered up to it, and its offset is not used: on another region's mirror
(docs/regions.md) the offsets differ, the numbers do not. One without (Sling's) covers the
packages up to its offset. The command
reader only records a request; the import thread checks it against the log and persists it in
the store (``persist``), so a clear or a pause survives restarts and is never half applied.

A pause command (``PauseCommand.paused``: true pauses, false resumes) holds every import from
the next batch on until a resume; the last one read wins. It must be numbered: numbering is
what refuses a copied pause or resume, and every publisher that sends one numbers it.

A numbered command (journal/sequence.py) is obeyed only when its number is above the last one
applied for its agent (stored with the clear offset or the pause state) and the last one read:
a copied clear command clears nothing again, a copied pause or resume changes nothing. One
numbered at or below a command read since this process started is a replay
(``scd_replayed_records_total{kind="command"}``, logged); the commands read again from the
topic's start at each start are below the stored number too, and are passed over without a
word.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from journal.api import Journal, Record
from journal.errors import JournalError, SignatureError
from journal.sequence import highest_sequence
from journal.wire import messages as m
from journal.wire.signing import RecordVerifier
from subscriber.metrics import SubscriberMetrics
from subscriber.store.base import Store

log = logging.getLogger(__name__)


class Commands:
    def __init__(
        self,
        name: str,
        instance_id: Callable[[], str],
        pub_agents: Sequence[str],
        journal: Journal,
        topics: tuple[str, str],  # (package topic, command topic)
        store: Store,
        metrics: SubscriberMetrics,
        verifier: RecordVerifier | None,
        editable: bool = True,
    ) -> None:
        self.name = name
        self.instance_id = instance_id
        self.pub_agents = frozenset(pub_agents)
        self.journal = journal
        self.package_topic, self.command_topic = topics
        self.store = store
        self.metrics = metrics
        self.verifier = verifier
        self.editable = editable
        # Called once a pause or resume is stored (the agent announces it at once).
        self.on_pause_stored: Callable[[], None] = lambda: None
        self._lock = threading.Lock()
        self._requested: dict[str, int] = {}  # pub agent -> highest clear offset requested
        self._requested_numbers: dict[str, int] = {}  # pub agent -> highest package number
        self._numbers: dict[str, int] = {}  # pub agent -> highest command number read
        # The last pause or resume admitted and not yet stored: (paused, pub agent, number).
        self._pause: tuple[bool, str, int] | None = None
        # Resumes stored since this process started (a resume releases a staged subscriber's
        # package held by a canary's failure: subscriber.bookkeeper.staging).
        self.resumes = 0

    def _kind(self, command: m.CommandMessage) -> str | None:
        """ "clear", "pause" or "resume"; None for a command this subscriber does not obey
        (another subscriber's, a clear sent to a read-only one)."""
        if command.sub_agent_name != self.name or command.sub_sling_id != self.instance_id():
            return None
        if command.HasField("pause_command"):
            return "pause" if command.pause_command.paused else "resume"
        return "clear" if command.HasField("clear_command") and self.editable else None

    def on_command(self, command: m.CommandMessage, record: Record) -> None:
        kind = self._kind(command)
        if kind is None:
            return
        if self.verifier is not None:
            try:
                self.verifier.verify(self.command_topic, record.headers, record.value)
            except SignatureError as exc:
                self._ignore("signature", f"{kind} at offset {record.offset} ignored: {exc}")
                return
        agent = command.pub_agent_name
        if agent not in self.pub_agents:
            self._ignore(
                "agent",
                f"{kind} at offset {record.offset} ignored: it names publisher agent "
                f"{agent[:100]!r}, not one this subscriber follows",
            )
            return
        number = command.sequence
        if kind != "clear" and not number:
            self._ignore("unnumbered", f"{kind} at offset {record.offset} ignored: not numbered")
            return
        with self._lock:
            if number and not self._admit(agent, number, record.offset, kind):
                return
            if kind != "clear":
                self._pause = (kind == "pause", agent, number)
                log.info("%s: %s requested by %s", self.name, kind, agent)
                return
            self._request_clear(agent, command.clear_command)

    def _request_clear(self, agent: str, clear: m.ClearCommand) -> None:
        """Record a clear read (under ``_lock``): by package number when it carries one."""
        if clear.sequence > 0:
            if clear.sequence > self._requested_numbers.get(agent, 0):
                self._requested_numbers[agent] = clear.sequence
                log.info(
                    "%s: clear of %s up to sequence %d requested", self.name, agent, clear.sequence
                )
        elif clear.offset > self._requested.get(agent, -1):
            self._requested[agent] = clear.offset
            log.info("%s: clear of %s up to offset %d requested", self.name, agent, clear.offset)

    def _admit(self, agent: str, number: int, offset: int, kind: str) -> bool:
        """True when command ``number`` of ``agent`` is new (under ``_lock``)."""
        read = self._numbers.get(agent, 0)
        state = self.store.state
        stored = state.command_sequences.get(agent, 0) if state is not None else 0
        if number <= read:
            self.metrics.replayed("command")
            log.warning(
                "%s: skipped a replayed %s command at offset %d: sequence %d of %s, at or "
                "below %d, the last one read",
                self.name,
                kind,
                offset,
                number,
                agent,
                read,
            )
            return False
        self._numbers[agent] = number
        return number > stored

    def cleared(self, pub_agent: str, offset: int, sequence: int) -> bool:
        """A stored clear covers ``pub_agent``'s package at ``offset`` numbered ``sequence``."""
        state = self.store.state
        return state is not None and state.cleared(pub_agent, offset, sequence)

    @property
    def paused(self) -> bool:
        """The stored pause state (False before the store opened)."""
        state = self.store.state
        return state is not None and state.paused

    def persist(self) -> None:
        """Store the pause or resume and the clears requested since the last call (import
        thread only). A clear beyond the log (its latest offset, or the highest number of the
        agent on its tail) is refused: it would skip packages not yet written."""
        with self._lock:
            pause, self._pause = self._pause, None
        if pause is not None:
            paused, agent, number = pause
            try:
                self.store.record_pause(paused, agent, number)
            except BaseException:
                with self._lock:  # tried again at the next call, unless a newer one came
                    self._pause = self._pause or pause
                raise
            log.info("%s: %s", self.name, "paused" if paused else "resumed")
            self.resumes += 0 if paused else 1
            self.on_pause_stored()
        state = self.store.state
        if state is None:
            return
        with self._lock:
            offsets = {a: o for a, o in self._requested.items() if o > state.clear_offset(a)}
            by_number = {
                a: n
                for a, n in self._requested_numbers.items()
                if n > state.clear_sequences.get(a, 0)
            }
            numbers = dict(self._numbers)
        if not offsets and not by_number:
            return
        try:
            latest = self.journal.latest_offset(self.package_topic)  # the next offset written
            written = {a: self._highest_number(a) for a in by_number}
        except JournalError as exc:
            log.warning("%s: clear not checked against the log yet: %s", self.name, exc)
            return  # tried again at the next call
        for agent in offsets.keys() | by_number.keys():
            offset, number = offsets.get(agent, -1), by_number.get(agent, 0)
            if offset >= latest:
                self._refuse(
                    agent,
                    self._requested,
                    offset,
                    f"up to offset {offset} refused: the package topic ends before offset {latest}",
                )
                offset = -1
            if number > written.get(agent, 0):
                self._refuse(
                    agent,
                    self._requested_numbers,
                    number,
                    f"up to sequence {number} refused: the package topic holds its packages "
                    f"up to sequence {written.get(agent, 0)}",
                )
                number = 0
            if offset >= 0 or number:
                self.store.record_clear(offset, agent, numbers.get(agent, 0), number)

    def _highest_number(self, agent: str) -> int:
        """The highest package number of ``agent`` on the package topic's tail (0: none)."""
        found, _ = highest_sequence(self.journal, self.package_topic, agent, self.verifier)
        return found or 0

    def _refuse(self, agent: str, requested: dict[str, int], value: int, why: str) -> None:
        """A clear beyond the log would skip packages not yet written: refused, for good."""
        self._ignore("beyond-log", f"clear of {agent} {why}")
        with self._lock:
            if requested.get(agent) == value:
                del requested[agent]

    def _ignore(self, reason: str, text: str) -> None:
        self.metrics.command_ignored(reason)
        log.warning("%s: %s", self.name, text)
