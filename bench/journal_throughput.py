"""Send and poll throughput of the journal API next to a bare confluent-kafka loop.

Prints one JSON document (progress goes to stderr). Variants, measured in the same run and
interleaved round by round so that machine noise spreads over all of them:

* ``bare_kafka``: confluent-kafka directly, with the producer settings of KafkaJournal;
* ``journal_kafka``: KafkaJournal (``start_send`` + ``finish_send`` of each, ``consumer().poll``);
* ``journal_sqlite``: SqliteJournal, the same loops on a file in a temporary directory.

Then the synchronous ``send()`` path (one record at a time, waiting for its acknowledgement),
which is what the publisher does per request, with fewer records since it is latency bound.

    .venv/bin/python -m bench.journal_throughput --bootstrap 127.0.0.1:29092
    .venv/bin/python -m bench.journal_throughput --messages 200 --rounds 1 --backends sqlite

See bench/README.md for what is compared and the targets.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import KafkaError, Message, Producer, TopicPartition

from bench.kafka_broker import resolve_bootstrap
from journal.api import Journal, Position, TopicSpec
from journal.kafka.journal import ACK_POLL_S, KafkaJournal
from journal.sqlite.journal import SqliteJournal

# Records per throughput run: 20,000 x 5 KB = 100 MB, enough for a run to last about a second
# on Kafka so that client start-up and the last linger/flush are a small share of it.
DEFAULT_MESSAGES = 20_000
# Record value size: 5 KB, the typical size of a content message on the journal.
DEFAULT_SIZE = 5 * 1024
# Rounds of every variant; the median of 3 discards one outlier run on a noisy machine.
DEFAULT_ROUNDS = 3
# Records per synchronous send() run: each one waits for its acknowledgement (linger.ms plus
# an acks=all round trip on Kafka, ~7 ms), so 500 take a few seconds.
DEFAULT_SYNC_MESSAGES = 500
# The journal layer may cost at most this share of the bare client's throughput.
MAX_OVERHEAD = 0.15
# Records asked for per consume()/poll() call: the journal API's default batch.
POLL_BATCH = 500
# Wait per consume()/poll() call for the first record; records are already on the log, so
# this only bounds the wait while the consumer connects.
POLL_TIMEOUT_S = 1.0
# A run that reads nothing for this long has lost records: fail instead of hanging.
STALL_TIMEOUT_S = 30.0
# Admin calls (create topic, metadata) and the bare producer's flush, outside the journal.
ADMIN_TIMEOUT_S = 10.0
# Records every variant sends, acknowledged, before its clock starts: a new idempotent
# producer's first send waits up to ~0.5 s for its producer id, a start-up cost that says
# nothing about throughput. Measured records start at this offset.
WARMUP_RECORDS = 1
# Pause between metadata queries while a new topic's leader is being elected.
LEADER_POLL_S = 0.05
# Bytes per MB in the reported rates (decimal megabytes, as network rates are quoted).
BYTES_PER_MB = 1_000_000
# Microseconds per second, for the CPU cost per record.
US_PER_S = 1_000_000

BACKENDS = ("kafka", "sqlite")


def bare_producer_config(bootstrap: str) -> dict[str, Any]:
    """KafkaJournal's producer settings (``KafkaJournal.producer_config``), without its error
    callback: the same batching and durability, so only the Python layer differs."""
    config = KafkaJournal(bootstrap).producer_config()  # connects to nothing
    del config["error_cb"]
    return config


def bare_consumer_config(bootstrap: str) -> dict[str, Any]:
    """KafkaJournal's consumer settings (journal/kafka/consumer.py, consumer_config)."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": f"scd-bench-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
    }


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def unique_topic(variant: str) -> str:
    return f"bench-{variant}-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class Settings:
    messages: int
    size: int
    sync_messages: int
    bootstrap: str | None
    work_dir: Path
    payload: bytes = field(repr=False)


# ---------------------------------------------------------------- timing


@dataclass(frozen=True)
class Sample:
    """One measured phase: elapsed wall time; CPU time of the calling thread (the Python
    layer plus the produce/consume calls it makes), which waiting on a busy broker does not
    inflate; CPU time of the whole process (librdkafka's threads included)."""

    wall_s: float
    thread_cpu_s: float
    process_cpu_s: float


class Clock:
    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.thread_cpu = time.thread_time()
        self.process_cpu = time.process_time()

    def sample(self) -> Sample:
        return Sample(
            time.perf_counter() - self.wall,
            time.thread_time() - self.thread_cpu,
            time.process_time() - self.process_cpu,
        )


@dataclass(frozen=True)
class Run:
    send: Sample
    poll: Sample


def read_until(count: int, read_batch: Callable[[], int]) -> Sample:
    """Call ``read_batch`` (returns records read) until ``count`` records are read."""
    done = 0
    clock = Clock()
    last_progress = clock.wall
    while done < count:
        got = read_batch()
        if got:
            done += got
            last_progress = time.perf_counter()
        elif time.perf_counter() - last_progress > STALL_TIMEOUT_S:
            raise RuntimeError(
                f"read {done} of {count} records, then nothing for {STALL_TIMEOUT_S} s"
            )
    sample = clock.sample()
    if done != count:
        raise RuntimeError(f"read {done} records, expected {count}")
    return sample


# ---------------------------------------------------------------- Kafka


def wait_for_leader(admin: KafkaJournal, topic: str) -> None:
    """A new topic's leader can take a moment to be known; wait outside the measurement."""
    deadline = time.monotonic() + ADMIN_TIMEOUT_S
    while True:
        info = admin.admin.list_topics(topic, timeout=ADMIN_TIMEOUT_S).topics.get(topic)
        if (
            info is not None
            and info.error is None
            and info.partitions
            and all(p.leader >= 0 for p in info.partitions.values())
        ):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic} has no leader after {ADMIN_TIMEOUT_S} s")
        time.sleep(LEADER_POLL_S)


def new_kafka_topic(journal: KafkaJournal, variant: str) -> str:
    """A fresh single-partition topic, created as KafkaJournal creates topics (same config)."""
    topic = unique_topic(variant)
    journal.create_topics([TopicSpec(topic)])
    wait_for_leader(journal, topic)
    return topic


def check_count(journal: Journal, topic: str, expected: int) -> None:
    high = journal.latest_offset(topic)
    if high != expected:
        raise RuntimeError(f"{topic} holds {high} records, expected {expected}")


def ready_producer(bootstrap: str, topic: str, payload: bytes) -> Producer:
    """A bare producer that has sent its warm-up records to ``topic``."""
    producer = Producer(bare_producer_config(bootstrap))
    for _ in range(WARMUP_RECORDS):
        producer.produce(topic, payload)
    if producer.flush(ADMIN_TIMEOUT_S):
        raise RuntimeError("bare producer: warm-up records not acknowledged")
    return producer


def warm_up(journal: Journal, topic: str, payload: bytes) -> None:
    for _ in range(WARMUP_RECORDS):
        journal.send(topic, payload)


def run_bare_kafka(s: Settings, admin: KafkaJournal) -> Run:
    assert s.bootstrap is not None
    topic = new_kafka_topic(admin, "bare")
    payload = s.payload
    producer = ready_producer(s.bootstrap, topic, payload)

    clock = Clock()
    for _ in range(s.messages):
        producer.produce(topic, payload)
        producer.poll(0)
    remaining = producer.flush(ADMIN_TIMEOUT_S)
    send = clock.sample()
    if remaining:
        raise RuntimeError(f"bare producer: {remaining} records not acknowledged")
    check_count(admin, topic, WARMUP_RECORDS + s.messages)

    # "At the beginning" (of the measured records) resolved to an offset before the clock
    # starts, as the journal's consumer() does: OFFSET_BEGINNING would make librdkafka look the
    # offset up on the first consume, a ~0.5 s start-up cost that says nothing about throughput.
    beginning = admin.earliest_offset(topic) + WARMUP_RECORDS
    consumer = RdConsumer(bare_consumer_config(s.bootstrap))
    consumer.assign([TopicPartition(topic, 0, beginning)])

    def read_batch() -> int:
        got = 0
        for msg in consumer.consume(num_messages=POLL_BATCH, timeout=POLL_TIMEOUT_S):
            if msg.error() is not None:
                raise RuntimeError(f"bare consumer: {msg.error()}")
            value = msg.value()
            if value is None or len(value) != s.size:
                raise RuntimeError("bare consumer: record of the wrong size")
            got += 1
        return got

    try:
        poll = read_until(s.messages, read_batch)
    finally:
        consumer.close()
    return Run(send, poll)


def journal_loops(journal: Journal, topic: str, s: Settings) -> Run:
    payload = s.payload
    clock = Clock()
    pending = [journal.start_send(topic, payload) for _ in range(s.messages)]
    for sent in pending:
        journal.finish_send(sent)
    send = clock.sample()
    failed = [p for p in pending if not p.done or p.error is not None]
    if failed:
        raise RuntimeError(f"{len(failed)} sends not acknowledged: {failed[0].error}")
    check_count(journal, topic, WARMUP_RECORDS + s.messages)

    with journal.consumer(topic, Position.earliest(WARMUP_RECORDS)) as consumer:

        def read_batch() -> int:
            got = 0
            for record in consumer.poll(POLL_TIMEOUT_S, POLL_BATCH):
                if len(record.value) != s.size:
                    raise RuntimeError("journal consumer: record of the wrong size")
                got += 1
            return got

        poll = read_until(s.messages, read_batch)
    return Run(send, poll)


@contextmanager
def kafka_journal(s: Settings, variant: str) -> Iterator[tuple[KafkaJournal, str]]:
    """A KafkaJournal and a fresh topic it created and sent its warm-up records to."""
    assert s.bootstrap is not None
    journal = KafkaJournal(s.bootstrap)
    try:
        topic = new_kafka_topic(journal, variant)
        warm_up(journal, topic, s.payload)
        yield journal, topic
    finally:
        journal.close()


def run_journal_kafka(s: Settings, _admin: KafkaJournal | None) -> Run:
    with kafka_journal(s, "journal") as (journal, topic):
        return journal_loops(journal, topic, s)


def sync_sends(journal: Journal, topic: str, s: Settings) -> Sample:
    payload = s.payload
    clock = Clock()
    for expected in range(WARMUP_RECORDS, WARMUP_RECORDS + s.sync_messages):
        offset = journal.send(topic, payload)
        if offset != expected:
            raise RuntimeError(f"send() returned offset {offset}, expected {expected}")
    return clock.sample()


def run_journal_kafka_sync(s: Settings, _admin: KafkaJournal | None) -> Sample:
    with kafka_journal(s, "journal-sync") as (journal, topic):
        return sync_sends(journal, topic, s)


class _Delivered:
    """Delivery report of one bare record."""

    __slots__ = ("error", "offset")

    def __init__(self) -> None:
        self.offset: int | None = None
        self.error: KafkaError | None = None

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        self.error = err
        self.offset = msg.offset()


def run_bare_kafka_sync(s: Settings, admin: KafkaJournal) -> Sample:
    """The bare equivalent of send(): produce one record, serve delivery reports until its
    own arrives (the same wait as KafkaJournal._wait, so linger.ms applies as there)."""
    assert s.bootstrap is not None
    topic = new_kafka_topic(admin, "bare-sync")
    payload = s.payload
    producer = ready_producer(s.bootstrap, topic, payload)
    clock = Clock()
    for expected in range(WARMUP_RECORDS, WARMUP_RECORDS + s.sync_messages):
        delivered = _Delivered()
        producer.produce(topic, payload, on_delivery=delivered)
        producer.poll(0)
        while delivered.offset is None:
            producer.poll(ACK_POLL_S)
        if delivered.error is not None or delivered.offset != expected:
            raise RuntimeError(f"bare send: {delivered.error}, offset {delivered.offset}")
    return clock.sample()


def run_bare_kafka_flush_sync(s: Settings, admin: KafkaJournal) -> Sample:
    """Reference: produce one record, then flush(); librdkafka sends a flushed batch at once,
    without waiting for linger.ms."""
    assert s.bootstrap is not None
    topic = new_kafka_topic(admin, "bare-flush")
    payload = s.payload
    producer = ready_producer(s.bootstrap, topic, payload)
    clock = Clock()
    for _ in range(s.sync_messages):
        producer.produce(topic, payload)
        if producer.flush(ADMIN_TIMEOUT_S):
            raise RuntimeError("bare producer: record not acknowledged")
    sample = clock.sample()
    check_count(admin, topic, WARMUP_RECORDS + s.sync_messages)
    return sample


# ---------------------------------------------------------------- SQLite


@contextmanager
def sqlite_journal(s: Settings) -> Iterator[tuple[SqliteJournal, str]]:
    """A fresh database file and topic per run, deleted afterwards to bound disk use."""
    with tempfile.TemporaryDirectory(dir=s.work_dir) as tmp:
        journal = SqliteJournal(Path(tmp) / "journal.db")
        try:
            topic = unique_topic("sqlite")
            journal.create_topics([TopicSpec(topic)])
            warm_up(journal, topic, s.payload)
            yield journal, topic
        finally:
            journal.close()


def run_journal_sqlite(s: Settings, _admin: KafkaJournal | None) -> Run:
    with sqlite_journal(s) as (journal, topic):
        return journal_loops(journal, topic, s)


def run_journal_sqlite_sync(s: Settings, _admin: KafkaJournal | None) -> Sample:
    with sqlite_journal(s) as (journal, topic):
        return sync_sends(journal, topic, s)


# ---------------------------------------------------------------- report


def rates(samples: list[Sample], records: int, size: int) -> dict[str, Any]:
    per_s = [records / x.wall_s for x in samples]
    median = statistics.median(per_s)

    def us_per_record(seconds: list[float]) -> float:
        return round(statistics.median(seconds) / records * US_PER_S, 2)

    return {
        "records_per_s": round(median, 1),
        "mb_per_s": round(median * size / BYTES_PER_MB, 2),
        "thread_cpu_us_per_record": us_per_record([x.thread_cpu_s for x in samples]),
        "process_cpu_us_per_record": us_per_record([x.process_cpu_s for x in samples]),
        "samples_records_per_s": [round(r, 1) for r in per_s],
        "samples_wall_s": [round(x.wall_s, 4) for x in samples],
        "samples_thread_cpu_s": [round(x.thread_cpu_s, 4) for x in samples],
    }


def ratio(journal: dict[str, Any], bare: dict[str, Any], key: str) -> float:
    journal_value: float = journal[key]
    bare_value: float = bare[key]
    return round(journal_value / bare_value, 4)


def paired_samples(journal: list[Sample], bare: list[Sample]) -> list[float]:
    """Per round: 1 - journal rate / bare rate, i.e. 1 - bare time / journal time."""
    return [round(1 - b.wall_s / j.wall_s, 4) for j, b in zip(journal, bare, strict=True)]


def paired_overhead(journal: list[Sample], bare: list[Sample]) -> float:
    return round(statistics.median(paired_samples(journal, bare)), 4)


def added_cpu(journal: dict[str, Any], bare: dict[str, Any]) -> float:
    journal_us: float = journal["thread_cpu_us_per_record"]
    bare_us: float = bare["thread_cpu_us_per_record"]
    return round(journal_us - bare_us, 2)


def cpu_estimate(journal: dict[str, Any], bare: dict[str, Any]) -> float:
    added_us = added_cpu(journal, bare)
    bare_rate: float = bare["records_per_s"]
    bare_us = US_PER_S / bare_rate
    return round(added_us / (bare_us + added_us), 4)


def machine_info() -> dict[str, Any]:
    return {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "confluent_kafka": importlib.metadata.version("confluent-kafka"),
        "librdkafka": confluent_kafka.libversion()[0],
        "sqlite": sqlite3.sqlite_version,
        "load_avg_1m_at_start": round(os.getloadavg()[0], 2),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Journal API send/poll throughput next to bare confluent-kafka (JSON)."
    )
    parser.add_argument("--messages", type=int, default=DEFAULT_MESSAGES)
    parser.add_argument("--size", type=int, default=DEFAULT_SIZE, help="value bytes")
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    parser.add_argument(
        "--sync-messages",
        type=int,
        default=None,
        help=f"records per send() run (default: min(--messages, {DEFAULT_SYNC_MESSAGES}))",
    )
    parser.add_argument(
        "--bootstrap",
        default=None,
        help="Kafka host:port (default: $SCD_TEST_KAFKA_BOOTSTRAP, else deploy/kafka.sh)",
    )
    parser.add_argument(
        "--backends", default=",".join(BACKENDS), help="comma-separated: kafka, sqlite"
    )
    args = parser.parse_args(argv)
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not args.backends or set(args.backends) - set(BACKENDS):
        parser.error(f"--backends: choose from {', '.join(BACKENDS)}")
    if min(args.messages, args.rounds, args.size) < 1:
        parser.error("--messages, --rounds and --size must be >= 1")
    if args.sync_messages is None:
        args.sync_messages = min(args.messages, DEFAULT_SYNC_MESSAGES)
    return args


ThroughputRun = Callable[[Settings, Any], Run]
SyncRun = Callable[[Settings, Any], Sample]


def rotated(names: list[str], round_no: int) -> list[str]:
    """Another order every round, so no variant always runs first (cold caches) or right
    after the heaviest one."""
    shift = round_no % len(names)
    return names[shift:] + names[:shift]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    use_kafka = "kafka" in args.backends
    bootstrap = resolve_bootstrap(args.bootstrap, log) if use_kafka else None
    machine = machine_info()

    throughput: dict[str, ThroughputRun] = {}
    sync: dict[str, SyncRun] = {}
    if use_kafka:
        throughput |= {"bare_kafka": run_bare_kafka, "journal_kafka": run_journal_kafka}
        sync |= {
            "bare_kafka": run_bare_kafka_sync,
            "bare_kafka_flush": run_bare_kafka_flush_sync,
            "journal_kafka": run_journal_kafka_sync,
        }
    if "sqlite" in args.backends:
        throughput["journal_sqlite"] = run_journal_sqlite
        sync["journal_sqlite"] = run_journal_sqlite_sync

    sends: dict[str, list[Sample]] = {name: [] for name in throughput}
    polls: dict[str, list[Sample]] = {name: [] for name in throughput}
    syncs: dict[str, list[Sample]] = {name: [] for name in sync}
    with tempfile.TemporaryDirectory(prefix="scd-bench-") as work:
        s = Settings(
            args.messages,
            args.size,
            args.sync_messages,
            bootstrap,
            Path(work),
            os.urandom(args.size),
        )
        admin = KafkaJournal(bootstrap) if bootstrap else None
        try:
            for round_no in range(args.rounds):
                tag = f"round {round_no + 1}/{args.rounds}"
                for name in rotated(list(throughput), round_no):
                    run = throughput[name](s, admin)
                    sends[name].append(run.send)
                    polls[name].append(run.poll)
                    log(
                        f"{tag} {name}: send {s.messages / run.send.wall_s:,.0f}/s, "
                        f"poll {s.messages / run.poll.wall_s:,.0f}/s"
                    )
                for name in rotated(list(sync), round_no):
                    sample = sync[name](s, admin)
                    syncs[name].append(sample)
                    log(f"{tag} {name} send(): {s.sync_messages / sample.wall_s:,.0f}/s")
        finally:
            if admin is not None:
                admin.close()

    machine["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
    report: dict[str, Any] = {
        "config": {
            "messages": s.messages,
            "size_bytes": s.size,
            "rounds": args.rounds,
            "sync_messages": s.sync_messages,
            "backends": args.backends,
            "bootstrap": bootstrap,
            "poll_batch": POLL_BATCH,
            "producer": bare_producer_config(bootstrap) if bootstrap else None,
        },
        "machine": machine,
        "throughput": {
            name: {
                "send": rates(sends[name], s.messages, s.size),
                "poll": rates(polls[name], s.messages, s.size),
            }
            for name in throughput
        },
        "sync_send": {
            "label": "send(): one record at a time, waiting for its acknowledgement",
            **{name: rates(syncs[name], s.sync_messages, s.size) for name in sync},
        },
    }
    if use_kafka:
        tp, sy = report["throughput"], report["sync_send"]
        bare, journal = tp["bare_kafka"], tp["journal_kafka"]
        send_overhead = round(1 - ratio(journal["send"], bare["send"], "records_per_s"), 4)
        poll_overhead = round(1 - ratio(journal["poll"], bare["poll"], "records_per_s"), 4)
        report["overhead_vs_bare"] = {
            "definition": "1 - journal_kafka / bare_kafka, median records/s",
            "send": send_overhead,
            "poll": poll_overhead,
            "sync_send": round(
                1 - ratio(sy["journal_kafka"], sy["bare_kafka"], "records_per_s"), 4
            ),
            "paired": {
                "definition": "median over rounds of 1 - journal_kafka / bare_kafka of the "
                "same round (variants of a round run seconds apart, under similar load)",
                "send": paired_overhead(sends["journal_kafka"], sends["bare_kafka"]),
                "poll": paired_overhead(polls["journal_kafka"], polls["bare_kafka"]),
                "samples_send": paired_samples(sends["journal_kafka"], sends["bare_kafka"]),
                "samples_poll": paired_samples(polls["journal_kafka"], polls["bare_kafka"]),
            },
            "thread_cpu_us_per_record_added": {
                "definition": "journal_kafka - bare_kafka, median calling-thread CPU us/record",
                "send": added_cpu(journal["send"], bare["send"]),
                "poll": added_cpu(journal["poll"], bare["poll"]),
            },
            "cpu_estimate": {
                "definition": "added calling-thread CPU / (bare wall time per record + added): "
                "the share of bare throughput the journal layer costs if none of its work "
                "overlaps the client's (an upper bound, little affected by broker noise)",
                "send": cpu_estimate(journal["send"], bare["send"]),
                "poll": cpu_estimate(journal["poll"], bare["poll"]),
            },
        }
        report["target"] = {
            "max_overhead": MAX_OVERHEAD,
            "send_met": send_overhead <= MAX_OVERHEAD,
            "poll_met": poll_overhead <= MAX_OVERHEAD,
        }
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
