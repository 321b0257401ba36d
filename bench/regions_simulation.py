"""Regions simulation: what subscribers in several regions cost the publisher, measured on the
publisher's real code (DiscoveryView, ErrorQueues, QueueCache and Queues), no network.

Subscribers are spread round-robin over the regions; region 0 is the publisher's own, the
others reach it through a mirror that delays their records (their timestamps are that much
older when read, as MirrorMaker keeps the source timestamp). Per announcement round (one
interval, 10 s by default as the subscribers announce), every subscriber sends one
DiscoveryMessage and one PackageStatusMessage (REMOVED_FAILED: the only status the publisher
keeps, so the upper bound of the status path); the publisher decodes and handles them, then
computes every queue (state, size, head, lag) over a cache of ``--entries`` packages.

Subscribers of the publisher's own region announce offsets of its log. Those of the other
regions announce what a subscriber on a mirror does: offsets of their copy (shifted by
``COPY_SHIFT``) and the sequence number of the last package applied, read as from a mirrored
discovery topic; their statuses carry the package's number too. The publisher maps the numbers
to its own offsets (publisher/queues/positions.py): that mapping is part of the measurement, and
``remote_positions_right`` checks every remote queue's processed offset against the offset the
subscriber's number stands for.

Prints one JSON document: per subscriber count, the publisher's CPU per round and as a share of
one core, the queue computation time, the memory the view and error queues hold
(tracemalloc) and the process's peak RSS.

    .venv/bin/python -m bench.regions_simulation --subscribers 100 1000 --regions 3
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from bench.publisher_bench import fill_journal
from journal.api import Record, TopicSpec
from journal.sqlite.journal import SqliteJournal
from journal.wire.messages import (
    DiscoveryMessage,
    PackageStatusMessage,
    Status,
    SubscriberConfiguration,
    SubscriberState,
    decode,
    encode,
)
from publisher.discovery import DiscoveryView
from publisher.metrics import PublisherMetrics
from publisher.queues.cache import QueueCache
from publisher.queues.error_queues import ErrorQueues
from publisher.queues.positions import package_offset
from publisher.queues.views import Queues

AGENT = "publish"
# The subscribers' default announcement interval and the publisher's discovery TTL.
ANNOUNCE_INTERVAL_S = 10.0
DISCOVERY_TTL_S = 30.0
# How far behind each remote region's mirror delivers (region 0 is the publisher's own): a
# second for a neighbour, five across an ocean, both well inside the TTL.
MIRROR_DELAY_MS = (0, 1000, 5000)
# A mirror's offsets differ from the publisher's log by this (MirrorMaker's duplicates).
COPY_SHIFT = 37
DEFAULT_ENTRIES = 10_000
DEFAULT_ROUNDS = 20
BLOCKED_AFTER_ATTEMPTS = 3


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def announcement(i: int, offset: int, sequence: int = 0) -> tuple[bytes, dict[str, str]]:
    message = DiscoveryMessage(
        sub_sling_id=f"sub-{i:04d}",
        sub_agent_name="subscriber",
        subscriber_configuration=SubscriberConfiguration(editable=True, max_retries=-1),
    )
    message.subscriber_state.append(
        SubscriberState(pub_agent_name=AGENT, offset=offset, retries=i % 4, sequence=sequence)
    )
    return encode(message)


def status(i: int, offset: int, sequence: int = 0) -> tuple[bytes, dict[str, str]]:
    return encode(
        PackageStatusMessage(
            sub_sling_id=f"sub-{i:04d}",
            sub_agent_name="subscriber",
            pub_agent_name=AGENT,
            offset=offset,
            status=Status.REMOVED_FAILED,
            sequence=sequence,
        )
    )


def simulate(
    cache: QueueCache, entries: int, subscribers: int, regions: int, rounds: int, *, trace: bool
) -> dict[str, Any]:
    """One run; with ``trace`` the memory is measured (tracemalloc slows every allocation, so
    the CPU figures come from a run without it)."""
    clock = {"now": 1_800_000_000_000}
    view = DiscoveryView(
        DISCOVERY_TTL_S, clock_ms=lambda: clock["now"], max_subscribers=max(1000, subscribers)
    )
    errors = ErrorQueues(AGENT, locate=lambda number: package_offset(cache, number))
    queues = Queues(
        cache,
        view,
        errors,
        agent_name=AGENT,
        topic="package",
        blocked_after_attempts=BLOCKED_AFTER_ATTEMPTS,
        clock_ms=lambda: clock["now"],
    )
    delays = [MIRROR_DELAY_MS[r % len(MIRROR_DELAY_MS)] for r in range(regions)]
    gc.collect()
    if trace:
        tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    handle_cpu: list[float] = []
    queue_cpu: list[float] = []
    summaries = []
    for n in range(rounds):
        clock["now"] += int(ANNOUNCE_INTERVAL_S * 1000)
        # Encoded outside the measurement: the subscribers' work, not the publisher's.
        batch = []
        expected = {}  # remote queue -> the publisher's offset its number stands for
        for i in range(subscribers):
            offset = (entries - 1 - (i * 7 + n) % entries) if i % 5 else entries - 1
            timestamp = clock["now"] - delays[i % regions]
            failed = max(0, offset - 1)
            if i % regions:  # a mirror: the copy's offsets, and the numbers (offset + 1)
                expected[f"sub-{i:04d}-subscriber"] = offset
                d = announcement(i, offset + COPY_SHIFT, offset + 1)
                s = status(i, failed + COPY_SHIFT, failed + 1)
            else:
                d, s = announcement(i, offset), status(i, failed)
            batch.append((d, s, timestamp, bool(i % regions)))
        started = time.process_time()
        for (d_value, d_headers), (s_value, s_headers), timestamp, remote in batch:
            record = Record("discovery", 0, 0, timestamp, None, d_headers, d_value)
            announce = view.handle_remote if remote else view.handle
            announce(decode(d_headers, d_value), record)  # type: ignore[arg-type]
            record = Record("status", 0, 0, timestamp, None, s_headers, s_value)
            report = errors.handle_remote_status if remote else errors.handle_status
            report(decode(s_headers, s_value), record)  # type: ignore[arg-type]
        view.refresh()
        handle_cpu.append(time.process_time() - started)
        started = time.process_time()
        summaries = queues.summaries()
        queue_cpu.append(time.process_time() - started)
    held = tracemalloc.get_traced_memory()[0] - base
    if trace:
        tracemalloc.stop()
    per_round = statistics.median(handle_cpu) + statistics.median(queue_cpu)
    return {
        "subscribers": subscribers,
        "regions": regions,
        "alive_seen": len(summaries),
        "remote_positions_right": all(
            s.processed_offset == expected[s.name] for s in summaries if s.name in expected
        )
        and len(expected) == sum(s.subscriber.remote for s in summaries),
        "queued_items": sum(s.size for s in summaries),
        "error_queue_items": sum(s.error_queue_size for s in summaries),
        "discovery_and_status_cpu_ms_per_round": round(statistics.median(handle_cpu) * 1000, 2),
        "all_queues_cpu_ms": round(statistics.median(queue_cpu) * 1000, 2),
        "all_queues_cpu_ms_max": round(max(queue_cpu) * 1000, 2),
        "publisher_core_share_at_one_queue_pass_per_round": round(
            per_round / ANNOUNCE_INTERVAL_S, 5
        ),
        "view_and_error_queues_bytes_tracemalloc": held,
        "bytes_per_subscriber": round(held / subscribers),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subscribers", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--regions", type=int, default=3)
    parser.add_argument("--entries", type=int, default=DEFAULT_ENTRIES)
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    args = parser.parse_args()
    if args.regions < 1 or args.entries < 1 or args.rounds < 1 or min(args.subscribers) < 1:
        parser.error("--regions, --entries, --rounds and --subscribers must be positive")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        journal = SqliteJournal(Path(tmp) / "journal.db")
        journal.create_topics([TopicSpec("package")])
        log(f"writing {args.entries} packages to the embedded journal")
        fill_journal(
            journal,
            "package",
            args.entries,
            agent=AGENT,
            size=5000,
            path=lambda i: f"/content/site/page-{i}",
            numbered=True,
        )
        cache = QueueCache(
            journal, "package", AGENT, fetch_timeout_s=60, metrics=PublisherMetrics()
        )
        cache.open(from_offset=0)
        while cache.next_offset < args.entries:
            cache.poll_tail(1.0)
        for subscribers in args.subscribers:
            log(f"simulating {subscribers} subscribers in {args.regions} regions")
            timed = simulate(
                cache, args.entries, subscribers, args.regions, args.rounds, trace=False
            )
            traced = simulate(
                cache, args.entries, subscribers, args.regions, args.rounds, trace=True
            )
            for key in ("view_and_error_queues_bytes_tracemalloc", "bytes_per_subscriber"):
                timed[key] = traced[key]
            results.append(timed)
        cache.stop()
        journal.close()
    print(
        json.dumps(
            {
                "benchmark": "regions_simulation",
                "python": platform.python_version(),
                "cpus": len(os.sched_getaffinity(0)),
                "announce_interval_s": ANNOUNCE_INTERVAL_S,
                "mirror_delay_ms": list(MIRROR_DELAY_MS[: args.regions]),
                "cached_packages": args.entries,
                "rounds": args.rounds,
                "results": results,
                "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
