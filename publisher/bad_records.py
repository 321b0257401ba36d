"""Hostile or broken journal records in the publisher's readers.

Records are data from the network: any writer of a topic can send an enum value out
of range, a megabyte of agent name, a negative offset. Every field a publisher reader keeps is
checked here; a record that fails is a *bad record*: skipped, counted in
``scd_publisher_bad_records_total{topic}`` and logged at most once per interval per topic.
A reader thread never dies of one, and a flood of them never floods the log.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter as Tally
from collections.abc import Callable
from typing import Protocol, TypeVar

from prometheus_client import Counter

from journal.api import Record
from publisher.errors import BadRecord
from runtime.ratelog import RateLimitedLog

log = logging.getLogger(__name__)

# Instance ids, agent names and package ids are UUIDs and short names; 255 characters is the
# usual name limit (the content rules' for node names too). A longer one is forged.
MAX_NAME_CHARS = 255
# Offsets are Kafka int64 offsets.
MAX_OFFSET = 2**63 - 1
# Text of a bad value shown in the log: enough to recognise it, never the megabyte itself.
SHOWN_CHARS = 40

M = TypeVar("M")


class EnumType(Protocol):
    def values(self) -> list[int]: ...


def _shown(value: str) -> str:
    return repr(value[:SHOWN_CHARS]) + (
        f"... ({len(value)} chars)" if len(value) > SHOWN_CHARS else ""
    )


def check_name(value: str, what: str) -> str:
    """A name used as a key or shown in logs and URLs: 1-255 printable characters."""
    if not value:
        raise BadRecord(f"{what} is empty")
    if len(value) > MAX_NAME_CHARS:
        raise BadRecord(f"{what} {_shown(value)} is longer than {MAX_NAME_CHARS} characters")
    if not value.isprintable():
        raise BadRecord(f"{what} {_shown(value)} holds control characters")
    return value


def check_offset(value: int, what: str, minimum: int = 0) -> int:
    if not minimum <= value <= MAX_OFFSET:
        raise BadRecord(f"{what} {value} is out of range ({minimum}..{MAX_OFFSET})")
    return value


def check_count(value: int, what: str) -> int:
    if value < 0:
        raise BadRecord(f"{what} {value} is negative")
    return value


def check_enum(enum: EnumType, value: int, what: str) -> int:
    # Protobuf enums are open: an unknown number decodes fine and must be refused here.
    if value not in enum.values():
        raise BadRecord(f"{what} {value} is not one of {sorted(enum.values())}")
    return value


class BadRecords:
    """Counts and logs bad records; ``guarded`` turns a handler into one that never raises."""

    def __init__(self, counter: Counter, logger: logging.Logger = log) -> None:
        self.counter = counter
        self.logger = logger
        self.counts: Tally[str] = Tally()
        self._lock = threading.Lock()
        self._logs: dict[str, RateLimitedLog] = {}

    def report(self, record: Record, exc: BaseException) -> None:
        topic = record.topic
        self.counter.labels(topic).inc()
        with self._lock:
            self.counts[topic] += 1
            limited = self._logs.setdefault(topic, RateLimitedLog(self.logger))
        where = f"{topic}-{record.partition}@{record.offset}"
        if isinstance(exc, BadRecord):
            limited.log(logging.WARNING, "skipped bad record %s: %s", where, exc)
        else:
            # Not a known kind of bad input: most likely a bug, so the trace is worth a line.
            limited.log(
                logging.ERROR,
                "skipped record %s: %s: %s",
                where,
                type(exc).__name__,
                exc,
                exc_info=exc,
            )

    def guarded(self, handler: Callable[[M, Record], None]) -> Callable[[M, Record], None]:
        def run(message: M, record: Record) -> None:
            try:
                handler(message, record)
            except Exception as exc:
                self.report(record, exc)

        return run
