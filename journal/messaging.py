"""Typed messaging on top of the journal: send protobuf messages, poll with handlers
dispatched by the ``type`` header.

A record whose type is unknown, or whose bytes do not decode, is logged, counted and skipped:
one bad record never stops a reader. A handler that raises is logged and counted too; handlers
that must not lose a record (the subscriber's import) do their own retrying.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from google.protobuf.message import Message

from journal.api import Consumer, Journal, PendingSend, Position, Record
from journal.errors import ForeignWireFormat, JournalError, UnknownMessageType
from journal.wire.messages import decode, encode, type_name
from journal.wire.signing import RecordSigner
from runtime.errors import DecodeError
from runtime.ratelog import RateLimitedLog
from runtime.supervisor import SupervisedThread

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)
Handler = Callable[[Any, Record], None]

# How long one poll waits for records before the poller checks whether it should stop, unless
# its owner says otherwise: bounds shutdown latency without busy-looping.
POLL_TIMEOUT_S = 0.1
# Pause after a failed poll (journal unreachable) before trying again.
POLL_ERROR_BACKOFF_S = 1.0


class MessageSender:
    """Sends journal messages to one topic; signs each record when given a ``signer``."""

    def __init__(self, journal: Journal, topic: str, signer: RecordSigner | None = None) -> None:
        self.journal = journal
        self.topic = topic
        self.signer = signer

    def encode(self, message: Message) -> tuple[bytes, dict[str, str]]:
        """The record's value and headers, signed with the signer if any."""
        value, headers = encode(message)
        if self.signer is not None:
            headers = self.signer.signed_headers(self.topic, headers, value)
        return value, headers

    def send(self, message: Message, key: str | None = None) -> int:
        value, headers = self.encode(message)
        return self.journal.send(
            self.topic, value, key=key.encode() if key is not None else None, headers=headers
        )

    def start_send(self, message: Message, key: str | None = None) -> PendingSend:
        """Queue ``message`` (Journal.start_send); ``Journal.finish_send`` waits for it."""
        value, headers = self.encode(message)
        return self.journal.start_send(
            self.topic, value, key=key.encode() if key is not None else None, headers=headers
        )


class MessagePoller:
    """Reads one topic from a position and dispatches each record to its type's handler.

    Counters (``counts``): ``delivered``, ``unknown_type``, ``foreign_format`` (a record of the
    other wire format), ``undecodable``, ``handler_error``.
    Use ``poll_once`` from your own loop, or ``start`` a background thread.
    """

    def __init__(
        self,
        journal: Journal,
        topic: str,
        position: Position,
        handlers: Mapping[type[Message], Handler],
        *,
        name: str | None = None,
        poll_timeout_s: float = POLL_TIMEOUT_S,
    ) -> None:
        self.topic = topic
        self.name = name or f"poller-{topic}"
        self.poll_timeout_s = poll_timeout_s
        self._handlers = {type_name(cls): handler for cls, handler in handlers.items()}
        self._journal = journal
        self._position = position
        self._consumer: Consumer | None = None
        self.counts: Counter[str] = Counter()
        self._stop = threading.Event()
        self.thread: SupervisedThread | None = None
        # Records anyone with write access can put there: a flood of them is one line per 10 s.
        self._skipped = RateLimitedLog(log)

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = self._journal.consumer(self.topic, self._position)
        return self._consumer

    def poll_once(self) -> int:
        """Poll and dispatch one batch; returns the number of records read."""
        records = self.consumer.poll(self.poll_timeout_s)
        for record in records:
            self.dispatch(record)
        return len(records)

    def dispatch(self, record: Record) -> None:
        where = f"{record.topic}-{record.partition}@{record.offset}"
        try:
            message = decode(record.headers, record.value)
        except ForeignWireFormat as exc:
            self.counts["foreign_format"] += 1
            self._skipped.log(logging.WARNING, "%s: skipped record %s: %s", self.name, where, exc)
            return
        except UnknownMessageType as exc:
            self.counts["unknown_type"] += 1
            self._skipped.log(logging.WARNING, "%s: skipped record %s: %s", self.name, where, exc)
            return
        except DecodeError as exc:
            self.counts["undecodable"] += 1
            self._skipped.log(logging.ERROR, "%s: skipped record %s: %s", self.name, where, exc)
            return
        # By the message: a Sling JSON record names its type in another header.
        handler = self._handlers.get(type_name(type(message)))
        if handler is None:
            self.counts["unhandled_type"] += 1
            return
        try:
            handler(message, record)
        except Exception:
            self.counts["handler_error"] += 1
            log.exception("%s: handler failed on %s", self.name, where)
            return
        self.counts["delivered"] += 1

    def start(self) -> MessagePoller:
        # Supervised: a failure outside a handler (say a bug in the consumer) restarts the loop.
        self.thread = SupervisedThread(self.name, self._run, stop=self._stop).start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_once()
            except JournalError as exc:
                self.counts["poll_error"] += 1
                log.warning("%s: poll failed, retrying: %s", self.name, exc)
                self._stop.wait(POLL_ERROR_BACKOFF_S)

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self.thread is not None:
            self.thread.join(timeout_s)
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
