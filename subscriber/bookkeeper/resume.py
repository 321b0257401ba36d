"""Where a store resumes on a log that may not be the one its offset came from.

A store's processed offset is a position on one log. The same packages on another log (region
B's MirrorMaker copy of region A's topic, docs/regions.md) sit at other offsets: resuming at the
stored offset there would skip packages or import some twice. The sequence numbers the store
keeps per publisher agent (subscriber/bookkeeper/sequences.py) survive copying, so they decide:

* the record at the stored offset on this log is a numbered package of an agent whose number is
  at or below the one the store applied: every package numbered above it comes later on this
  log, so the next offset is right (the same log, or a copy that holds more records);
* anything else (a higher number, nothing there, a record of no known agent) means the offset
  belongs to another log: the store resumes at this log's first retained record and the
  sequence check skips what it applied (read and decoded, never imported again).

Records without numbers (older publishers) cannot be placed on another log: a store that holds
no sequence resumes at its offset, as before. The probe reads one record and trusts its number
without verifying a signature: a forged number only chooses between the stored offset (what a
store without sequences does anyway) and a re-read from the log's start, which the sequence
check makes harmless.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from journal.api import Journal, Position, Record
from journal.errors import UnknownMessageType
from journal.sequence import record_sequence
from journal.wire.messages import PackageMessage, decode
from runtime.errors import DecodeError

log = logging.getLogger(__name__)

# Reading the record at the stored offset: a healthy broker answers within a poll or two;
# after this the journal counts as unavailable (the caller's retry helps).
PROBE_TIMEOUT_S = 10.0
PROBE_POLL_S = 0.5


def probe(journal: Journal, topic: str, offset: int) -> Record | None:
    """The record at ``offset`` of ``topic`` (partition 0), or None when the log has none."""
    earliest, latest = journal.earliest_offset(topic), journal.latest_offset(topic)
    if not earliest <= offset < latest:
        return None
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    with journal.consumer(topic, Position.at(offset)) as consumer:
        while time.monotonic() < deadline:
            for record in consumer.poll(PROBE_POLL_S, max_records=1):
                return record if record.offset == offset else None
    raise TimeoutError(
        f"{topic}: the record at offset {offset} was not read within {PROBE_TIMEOUT_S} s"
    )


def same_log(record: Record | None, sequences: Mapping[str, int]) -> bool:
    """True when ``record`` (the one at the stored offset) shows this log holds everything the
    store applied at or before that offset."""
    if record is None:
        return False
    try:
        message = decode(record.headers, record.value)
    except (UnknownMessageType, DecodeError):
        return False
    if not isinstance(message, PackageMessage):
        return False
    number = record_sequence(message)
    applied = sequences.get(message.pub_agent_name)
    return number > 0 and applied is not None and number <= applied


def resume_offset(
    journal: Journal, topic: str, stored: int | None, sequences: Mapping[str, int]
) -> int | None:
    """The next offset to read on ``topic`` for a store at ``stored`` holding ``sequences``
    (None: a new store, whose start is decided elsewhere)."""
    if stored is None or not sequences:
        return None if stored is None else stored + 1
    if same_log(probe(journal, topic, stored), sequences):
        return stored + 1
    start = journal.earliest_offset(topic)
    log.warning(
        "the stored offset %d does not hold the last package applied on %s (another log, a "
        "mirror or a cloned store): resuming by sequence from offset %d, skipping the %d "
        "agents' packages already applied (%s)",
        stored,
        topic,
        start,
        len(sequences),
        ", ".join(f"{agent} <= {number}" for agent, number in sorted(sequences.items())[:5]),
    )
    return start
