"""Publisher benchmark: distribute throughput/latency next to bare Kafka, and queue computation.

Prints one JSON document (progress goes to stderr):

* ``distribute``: ``POST /distribute`` of ~5 KB packages against a ``python -m scd publisher``
  process on Kafka: latency p50/p99 one request at a time, then throughput with concurrent
  clients; beside it, a bare confluent-kafka producer sending the same bytes (``produce`` +
  ``flush`` per record, the synchronous path a request takes; and pipelined, the ceiling).
* ``queues``: a queue cache of 100,000 entries filled from the embedded journal, 100 alive
  subscribers at spread offsets: time to compute every queue (state, size, head, lag, error
  queue size) cold and warm (target < 10 ms warm), and bytes per cached entry (target
  <= 150 B), measured with tracemalloc and from the arrays' own sizes.

    .venv/bin/python -m bench.publisher_bench --bootstrap 127.0.0.1:19092
    .venv/bin/python -m bench.publisher_bench --skip-distribute --entries 100000
"""

from __future__ import annotations

import argparse
import base64
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from journal.api import RECORD_OVERHEAD_BYTES, Record, TopicSpec
from journal.kafka.journal import PRODUCER_LINGER_MS, KafkaJournal
from journal.messaging import MessageSender
from journal.sqlite.journal import SqliteJournal
from journal.wire.messages import (
    DiscoveryMessage,
    PackageMessage,
    ReqType,
    SubscriberConfiguration,
    SubscriberState,
)
from publisher.client import PublisherClient
from publisher.discovery import DiscoveryView
from publisher.metrics import PublisherMetrics
from publisher.queues.cache import QueueCache
from publisher.queues.error_queues import ErrorQueues
from publisher.queues.views import Queues
from runtime.stats import percentile
from tests.services import free_port

REPO_DIR = Path(__file__).resolve().parent.parent

# Payload of one package: 5 KB of incompressible bytes, the typical package size of REFERENCE.md.
PACKAGE_BYTES = 5 * 1000
# Requests measured one at a time (latency) and in the concurrent run (throughput).
DEFAULT_LATENCY_REQUESTS = 300
DEFAULT_THROUGHPUT_REQUESTS = 1000
# Concurrent clients of the throughput run: enough to keep the publisher's thread pool busy.
DEFAULT_CLIENTS = 8
# Requests sent and discarded before measuring (connections, producer id, first topic lookup).
WARMUP_REQUESTS = 20
# The queue scenario.
DEFAULT_ENTRIES = 100_000
DEFAULT_SUBSCRIBERS = 100
# Warm queue computations timed; the median is reported.
QUEUE_ROUNDS = 20
# How long the publisher process may take to become ready.
READY_TIMEOUT_S = 60.0
TOKEN = "bench-token-0123456789abcdef"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def percentiles(samples_s: list[float], digits: int = 3) -> dict[str, float]:
    """p50, p99 and max of ``samples_s`` in milliseconds (0 of no samples)."""
    samples = samples_s or [0.0]
    return {
        f"{name}_ms": round(percentile(samples, pct) * 1000, digits)
        for name, pct in (("p50", 50), ("p99", 99), ("max", 100))
    }


# ---------------------------------------------------------------- (a) distribute


def start_publisher(
    bootstrap: str, prefix: str, work: Path, instance: str = "bench", tree: Path = REPO_DIR
) -> tuple[subprocess.Popen[bytes], str]:
    """A ``scd publisher`` process of agent ``prefix`` (its topics ``prefix.*``): ``instance``
    names it among the agent's instances; ``tree`` is the source tree it runs (``python -m``
    imports scd from its working directory first: another checkout runs that checkout)."""
    port = free_port()
    logfile = work / f"publisher-{instance}.log"
    process = spawn_publisher(
        {
            "SCD_JOURNAL_BACKEND": "kafka",
            "SCD_JOURNAL_BOOTSTRAP_SERVERS": bootstrap,
            **{
                f"SCD_JOURNAL_TOPICS__{kind.upper()}": f"{prefix}.{kind}"
                for kind in ("package", "status", "discovery", "command", "event")
            },
            "SCD_BLOB_BACKEND": "local",
            "SCD_BLOB_LOCAL_ROOT": str(work / "blobs"),
            "SCD_PUBLISHER_API_TOKEN": TOKEN,
            "SCD_PUBLISHER_AGENT_NAME": prefix,
            "SCD_PUBLISHER_LEADER_TOPIC": f"{prefix}.leader",
            "SCD_PUBLISHER_PORT": str(port),
            "SCD_PUBLISHER_INSTANCE_ID": instance,
        },
        tree,
        logfile,
    )
    url = f"http://127.0.0.1:{port}"
    if wait_ready(url, process):
        return process, url
    process.kill()
    raise SystemExit(f"publisher did not become ready; see {logfile}")


def spawn_publisher(settings: dict[str, str], tree: Path, log: Path) -> subprocess.Popen[bytes]:
    """``scd publisher`` run from the source tree ``tree`` (``python -m`` imports scd from its
    working directory first), with ``settings`` its only SCD_* variables, its output to
    ``log``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCD_")}
    env.update(settings)
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "scd", "publisher"], env=env, cwd=tree, stdout=out, stderr=out
        )


def wait_ready(url: str, process: subprocess.Popen[bytes]) -> bool:
    """Whether the publisher at ``url`` answered /ready within READY_TIMEOUT_S (False as soon
    as its ``process`` ended)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    with PublisherClient(url, timeout_s=2) as api:
        while time.monotonic() < deadline and process.poll() is None:
            if api.ready():
                return True
            time.sleep(0.2)
    return False


def distribute_body() -> dict[str, Any]:
    data = base64.b64encode(os.urandom(PACKAGE_BYTES)).decode()
    return {
        "action": "ADD",
        "paths": ["/content/site/page"],
        "nodes": [
            {
                "path": "/content/site/page",
                "properties": {"title": "Page", "data": {"type": "binary", "base64": data}},
            }
        ],
    }


def bench_distribute(
    bootstrap: str, latency_requests: int, throughput_requests: int, clients: int
) -> dict[str, Any]:
    prefix = f"bench-pub-{uuid.uuid4().hex[:10]}"
    with tempfile.TemporaryDirectory() as tmp:
        process, url = start_publisher(bootstrap, prefix, Path(tmp))
        try:
            body = distribute_body()
            sizes: list[int] = []
            with PublisherClient(url, TOKEN, timeout_s=60) as api:
                for _ in range(WARMUP_REQUESTS):
                    api.distribute(body)
                log(f"distribute: {latency_requests} sequential requests")
                latencies = []
                started = time.perf_counter()
                for _ in range(latency_requests):
                    t0 = time.perf_counter()
                    answer = api.distribute(body)
                    latencies.append(time.perf_counter() - t0)
                    sizes.append(answer["size"])
                sequential_s = time.perf_counter() - started
            log(f"distribute: {throughput_requests} requests from {clients} clients")
            concurrent_lat: list[float] = []
            lock = threading.Lock()

            def worker(count: int) -> None:
                with PublisherClient(url, TOKEN, timeout_s=60) as api:
                    for _ in range(count):
                        t0 = time.perf_counter()
                        api.distribute(body)
                        with lock:
                            concurrent_lat.append(time.perf_counter() - t0)

            threads = [
                threading.Thread(target=worker, args=(throughput_requests // clients,))
                for _ in range(clients)
            ]
            started = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            concurrent_s = time.perf_counter() - started
        finally:
            process.terminate()
            process.wait(30)
    package_bytes = int(statistics.median(sizes))
    return {
        "package_bytes": package_bytes,
        "sequential": {
            "requests": latency_requests,
            "per_s": round(latency_requests / sequential_s, 1),
            **percentiles(latencies),
        },
        "concurrent": {
            "clients": clients,
            "requests": len(concurrent_lat),
            "per_s": round(len(concurrent_lat) / concurrent_s, 1),
            **percentiles(concurrent_lat),
        },
        "bare_kafka": bench_bare_kafka(
            bootstrap, package_bytes, latency_requests, throughput_requests
        ),
    }


def bench_bare_kafka(
    bootstrap: str, size: int, sync_count: int, async_count: int
) -> dict[str, Any]:
    """The same bytes through confluent-kafka alone, with KafkaJournal's producer settings."""
    topic = f"bench-bare-{uuid.uuid4().hex[:10]}"
    KafkaJournal(bootstrap).create_topics([TopicSpec(topic)])
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": PRODUCER_LINGER_MS,
            "message.max.bytes": 1024 * 1024 + RECORD_OVERHEAD_BYTES,
        }
    )
    payload = os.urandom(size)
    for _ in range(WARMUP_REQUESTS):
        producer.produce(topic, payload)
        producer.flush(30)
    log(f"bare kafka: {sync_count} produce+flush")
    latencies = []
    started = time.perf_counter()
    for _ in range(sync_count):
        t0 = time.perf_counter()
        producer.produce(topic, payload)
        if producer.flush(30):
            raise SystemExit("bare producer: flush timed out")
        latencies.append(time.perf_counter() - t0)
    sync_s = time.perf_counter() - started
    log(f"bare kafka: {async_count} pipelined produce, one flush")
    started = time.perf_counter()
    for _ in range(async_count):
        producer.produce(topic, payload)
        producer.poll(0)
    producer.flush(30)
    async_s = time.perf_counter() - started
    return {
        "produce_flush_each": {
            "records": sync_count,
            "per_s": round(sync_count / sync_s, 1),
            **percentiles(latencies),
        },
        "pipelined": {"records": async_count, "per_s": round(async_count / async_s, 1)},
    }


# ---------------------------------------------------------------- (b) queues


def section_page(i: int) -> str:
    return f"/content/site/en/section-{i % 97}/page-{i}"


def fill_journal(
    journal: SqliteJournal,
    topic: str,
    entries: int,
    *,
    agent: str = "publish",
    size: int = PACKAGE_BYTES,
    path: Callable[[int], str] = section_page,
    numbered: bool = False,
) -> None:
    """``entries`` package messages of publisher agent ``agent`` on ``topic``, the i-th of
    ``size`` bytes at ``path(i)``; ``numbered``: with the sequence numbers journal/sequence.py
    gives the packages of an empty topic."""
    sender = MessageSender(journal, topic)
    pending = []
    for i in range(entries):
        message = PackageMessage(
            pub_sling_id="pub",
            pub_agent_name=agent,
            pkg_id=uuid.uuid4().hex,
            req_type=ReqType.ADD,
            pkg_type="scd-content",
            pkg_length=size,
            created_ms=1_700_000_000_000 + i,
        )
        message.paths.append(path(i))
        if numbered:
            message.sequence = i + 1  # the package at offset i
        pending.append(sender.start_send(message))
    for sent in pending:
        journal.finish_send(sent)


def structural_bytes(cache: QueueCache) -> int:
    total = 0
    for segment in cache._segments:
        for name in ("_offsets", "_created", "_sizes", "_kinds", "_ends", "_text"):
            total += sys.getsizeof(getattr(segment, name))
    return total


def new_cache(journal: SqliteJournal, topic: str) -> QueueCache:
    cache = QueueCache(journal, topic, "publish", fetch_timeout_s=60, metrics=PublisherMetrics())
    cache.open(from_offset=0)
    return cache


def fill(cache: QueueCache, entries: int) -> None:
    while cache.next_offset < entries:
        cache.poll_tail(1.0)


def bench_queues(entries: int, subscribers: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        journal = SqliteJournal(Path(tmp) / "journal.db")
        topic = "bench.package"
        journal.create_topics([TopicSpec(topic)])
        log(f"queues: writing {entries} packages to the embedded journal")
        fill_journal(journal, topic, entries)
        # Memory first, in a cache of its own: tracemalloc slows every allocation down.
        traced_cache = new_cache(journal, topic)
        gc.collect()
        tracemalloc.start()
        baseline = tracemalloc.get_traced_memory()[0]
        fill(traced_cache, entries)
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] - baseline
        tracemalloc.stop()
        traced_cache.stop()
        del traced_cache
        cache = new_cache(journal, topic)
        started = time.perf_counter()
        fill(cache, entries)
        fill_s = time.perf_counter() - started
        now_ms = int(time.time() * 1000)
        view = DiscoveryView(ttl_s=30, clock_ms=lambda: now_ms)
        for i in range(subscribers):
            message = DiscoveryMessage(
                sub_sling_id=f"sub-{i:03d}",
                sub_agent_name="subscriber",
                subscriber_configuration=SubscriberConfiguration(
                    editable=True, max_retries=1 if i % 2 else -1
                ),
            )
            message.subscriber_state.append(
                SubscriberState(
                    pub_agent_name="publish",
                    offset=entries - 1 - (i * entries // subscribers),
                    retries=i % 4,
                )
            )
            view.handle(message, Record("d", 0, i, now_ms, None, {}, b""))
        queues = Queues(
            cache,
            view,
            ErrorQueues("publish"),
            agent_name="publish",
            topic=topic,
            blocked_after_attempts=3,
            clock_ms=lambda: now_ms,
        )
        t0 = time.perf_counter()
        summaries = queues.summaries()
        cold_ms = (time.perf_counter() - t0) * 1000
        warm = []
        for _ in range(QUEUE_ROUNDS):
            t0 = time.perf_counter()
            queues.summaries()
            warm.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        page = queues.items(summaries[-1].name, 0, 100)
        page_ms = (time.perf_counter() - t0) * 1000
        cached = cache.size
        cache.stop()
        journal.close()
    return {
        "entries": cached,
        "subscribers": len(summaries),
        "total_queue_items": sum(s.size for s in summaries),
        "fill_s": round(fill_s, 2),
        "fill_entries_per_s": round(cached / fill_s),
        "all_queues_cold_ms": round(cold_ms, 3),
        "all_queues_warm_ms": round(statistics.median(warm), 3),
        "all_queues_warm_max_ms": round(max(warm), 3),
        "page_of_100_items_ms": round(page_ms, 3),
        "page_items": len(page),
        "bytes_per_entry_tracemalloc": round(traced / cached, 1),
        "bytes_per_entry_arrays": round(structural_bytes(cache) / cached, 1),
        "targets": {"all_queues_warm_ms": 10, "bytes_per_entry": 150},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default=os.environ.get("SCD_TEST_KAFKA_BOOTSTRAP"))
    parser.add_argument("--latency-requests", type=int, default=DEFAULT_LATENCY_REQUESTS)
    parser.add_argument("--throughput-requests", type=int, default=DEFAULT_THROUGHPUT_REQUESTS)
    parser.add_argument("--clients", type=int, default=DEFAULT_CLIENTS)
    parser.add_argument("--entries", type=int, default=DEFAULT_ENTRIES)
    parser.add_argument("--subscribers", type=int, default=DEFAULT_SUBSCRIBERS)
    parser.add_argument("--skip-distribute", action="store_true")
    args = parser.parse_args()
    result: dict[str, Any] = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
    }
    if not args.skip_distribute:
        if not args.bootstrap:
            raise SystemExit("--bootstrap (or SCD_TEST_KAFKA_BOOTSTRAP) is needed for (a)")
        result["distribute"] = bench_distribute(
            args.bootstrap, args.latency_requests, args.throughput_requests, args.clients
        )
    result["queues"] = bench_queues(args.entries, args.subscribers)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
