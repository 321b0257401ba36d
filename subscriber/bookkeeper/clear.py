"""Clear commands: what an editable subscriber accepts from the command topic.

A command is obeyed only when it names this subscriber (agent name and instance id), names a
publisher agent this subscriber follows, carries a valid signature (when keys are configured),
and clears no further than the package topic's latest offset. The clear applies to the
packages of the agent it names only. The command reader only records a request; the import
thread checks it against the log and persists it in the store (``persist``), so a clear
survives restarts and is never half applied.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from journal.api import Journal, Record
from journal.errors import JournalError
from journal.wire import messages as m
from journal.wire.signing import RecordVerifier, SignatureError
from subscriber.metrics import SubscriberMetrics
from subscriber.store.base import Store

log = logging.getLogger(__name__)


class ClearRequests:
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
    ) -> None:
        self.name = name
        self.instance_id = instance_id
        self.pub_agents = frozenset(pub_agents)
        self.journal = journal
        self.package_topic, self.command_topic = topics
        self.store = store
        self.metrics = metrics
        self.verifier = verifier
        self._lock = threading.Lock()
        self._requested: dict[str, int] = {}  # pub agent -> highest clear offset requested

    def on_command(self, command: m.CommandMessage, record: Record) -> None:
        if command.sub_agent_name != self.name or command.sub_sling_id != self.instance_id():
            return  # another subscriber's command
        if not command.HasField("clear_command"):
            return
        if self.verifier is not None:
            try:
                self.verifier.verify(self.command_topic, record.headers, record.value)
            except SignatureError as exc:
                self._ignore("signature", f"clear at offset {record.offset} ignored: {exc}")
                return
        agent = command.pub_agent_name
        if agent not in self.pub_agents:
            self._ignore(
                "agent",
                f"clear at offset {record.offset} ignored: it names publisher agent "
                f"{agent[:100]!r}, not one this subscriber follows",
            )
            return
        offset = command.clear_command.offset
        with self._lock:
            if offset > self._requested.get(agent, -1):
                self._requested[agent] = offset
                log.info("%s: clear of %s up to offset %d requested", self.name, agent, offset)

    def cleared(self, pub_agent: str) -> int:
        """Packages of ``pub_agent`` up to this offset are cleared (-1: none)."""
        state = self.store.state
        return state.clear_offset(pub_agent) if state is not None else -1

    def persist(self) -> None:
        """Store the clears requested since the last call (import thread only). A clear beyond
        the log's latest offset is refused: it would skip packages not yet written."""
        with self._lock:
            pending = {a: o for a, o in self._requested.items() if o > self.cleared(a)}
        if not pending:
            return
        try:
            latest = self.journal.latest_offset(self.package_topic)  # the next offset written
        except JournalError as exc:
            log.warning("%s: clear not checked against the log yet: %s", self.name, exc)
            return  # tried again at the next call
        for agent, offset in pending.items():
            if offset >= latest:
                self._ignore(
                    "beyond-log",
                    f"clear of {agent} up to offset {offset} refused: the package topic ends "
                    f"before offset {latest}",
                )
                with self._lock:
                    if self._requested.get(agent) == offset:
                        del self._requested[agent]
                continue
            self.store.record_clear(offset, agent)

    def _ignore(self, reason: str, text: str) -> None:
        self.metrics.command_ignored(reason)
        log.warning("%s: %s", self.name, text)
