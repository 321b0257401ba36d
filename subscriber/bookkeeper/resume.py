"""Where a store resumes on a log that may not be the one its offset came from.

A store's processed offset is a position on one log. The same packages on another log (region
B's MirrorMaker copy of region A's topic, docs/regions.md) sit at other offsets: resuming at the
stored offset there would skip packages or import some twice. The sequence numbers the store
keeps per publisher agent (subscriber/bookkeeper/sequences.py) survive copying, so they decide:

* the stored offset is past this log's end, or the record there is a numbered package of an
  agent whose number is above the one the store applied: the offset belongs to another log, on
  which the packages sit at lower offsets. The store resumes at this log's first retained
  record and the sequence check skips what it applied (read and decoded, never imported
  again);
* anything else resumes after the stored offset, as on the log it came from: a number at or
  below the applied one (every package numbered above it comes later on this log: the same
  log, or a copy holding more records, such as MirrorMaker's duplicates), and records that
  prove nothing (no number, another agent, undecodable), where re-reading the log could import
  unnumbered packages twice. An offset the log deleted is reported as a lag beyond retention
  (subscriber/bookkeeper/behind_log.py); once the gap is accepted, the sequence check skips what
  was applied.

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
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    with journal.consumer(topic, Position.at(offset)) as consumer:
        while time.monotonic() < deadline:
            for record in consumer.poll(PROBE_POLL_S, max_records=1):
                return record if record.offset == offset else None
    raise TimeoutError(
        f"{topic}: the record at offset {offset} was not read within {PROBE_TIMEOUT_S} s"
    )


def applied_later(record: Record, sequences: Mapping[str, int]) -> bool:
    """True when ``record`` (the one at the stored offset) is a package numbered above what
    the store applied of its agent: proof that the offset is another log's."""
    try:
        message = decode(record.headers, record.value)
    except (UnknownMessageType, DecodeError):
        return False
    if not isinstance(message, PackageMessage):
        return False
    applied = sequences.get(message.pub_agent_name)
    return applied is not None and record_sequence(message) > applied


def resume_offset(
    journal: Journal, topic: str, stored: int | None, sequences: Mapping[str, int]
) -> int | None:
    """The next offset to read on ``topic`` for a store at ``stored`` holding ``sequences``
    (None: a new store, whose start is decided elsewhere)."""
    if stored is None:
        return None
    if not sequences:
        return stored + 1
    earliest, latest = journal.earliest_offset(topic), journal.latest_offset(topic)
    if stored < earliest:
        return stored + 1  # deleted: a lag beyond retention, reported as such
    if stored < latest:
        record = probe(journal, topic, stored)
        if record is None or not applied_later(record, sequences):
            return stored + 1
    log.warning(
        "the stored offset %d is not where the last package applied is on %s (another log: a "
        "mirror or a moved store): resuming by sequence from offset %d, skipping the packages "
        "already applied (%s)",
        stored,
        topic,
        earliest,
        ", ".join(f"{agent} <= {number}" for agent, number in sorted(sequences.items())[:5]),
    )
    return earliest
