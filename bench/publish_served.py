"""Publish -> served: from a package's send to the moment every subscriber serves it over its
read API, next to publish -> imported of the same run; and whether reads slow imports.

Three subscriber agents (one Spark driver, Delta stores in a work directory, the embedded
journal or Kafka with ``--bootstrap``) and their read API on one endpoint, as a daemon of
three agents serves it. Packages (one new page each) are sent at ``--rate`` for
``--seconds``, in three runs, one after the other:

* ``quiet``: nothing reads; publish -> imported (the end of the commit that held it);
* ``reads``: ``--reads-per-s`` random node reads over HTTP beside the stream; the imports'
  p99 against ``quiet``'s (the issue's bound: within 1.1x);
* ``served``: one client per subscriber asks for the newest page (HEAD, every ``--poll-ms``)
  until it is answered; publish -> served against publish -> imported of the same run (the
  bound: p50 within 1.2x). The poll's period bounds the resolution of ``served``.

Prints one JSON document; progress goes to stderr. Percentiles are nearest-rank.

    .venv/bin/python -m bench.publish_served
    .venv/bin/python -m bench.publish_served --bootstrap 127.0.0.1:19092 --seconds 60
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from journal.api import Journal
from journal.factory import open_journal
from journal.settings import JournalSettings, TopicSettings
from journal.topics import topic_specs
from journal.wire import messages as m
from runtime.stats import percentile
from subscriber.agent import SubscriberAgent
from subscriber.fleet.view import AgentsView
from subscriber.http import HealthServer
from subscriber.reads.api import ReadApi
from subscriber.settings import SubscriberSettings
from subscriber.spark import spark_session
from subscriber.store.changes import ChangeSet
from subscriber.store.delta import DeltaStore
from tests.subscriber.harness import send_package
from tests.subscriber.packages import node, package

SUBSCRIBERS = 3
WARMUP_PACKAGES = 5
DRAIN_TIMEOUT_S = 300.0
# Beyond this a package counts as never served (the run fails).
SERVE_TIMEOUT_S = 60.0
LOOPBACK = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def spread(values: list[float]) -> dict[str, float]:
    return {
        "p50_s": round(percentile(values, 50), 3),
        "p99_s": round(percentile(values, 99), 3),
        "max_s": round(max(values), 3),
    }


@dataclass
class Imported:
    """When each offset was committed, per agent (the end of the commit that held it)."""

    at_ms: dict[str, dict[int, float]] = field(default_factory=dict)

    def wrap(self, agent: SubscriberAgent) -> None:
        mine = self.at_ms.setdefault(agent.name, {})
        original: Callable[[ChangeSet], None] = agent.store.commit

        def commit(changes: ChangeSet) -> None:
            original(changes)
            done = time.time() * 1000
            for unit in changes.units:
                mine[unit.offset] = done

        setattr(agent.store, "commit", commit)  # noqa: B010 -- instance attribute, bench only


@dataclass
class Sent:
    offset: int
    path: str
    created_ms: int


class Fleet:
    def __init__(self, journal: Journal, js: JournalSettings, work: Path) -> None:
        self.journal, self.js = journal, js
        settings = [
            SubscriberSettings(
                agent_name=f"sub-{i}",
                store_path=str(work / f"store-{i}"),
                reset="earliest",
                journal=js,
                read_index_dir=work / f"index-{i}",
            )
            for i in range(1, SUBSCRIBERS + 1)
        ]
        self.stack = contextlib.ExitStack()
        spark = spark_session(settings[0], "scd-bench-served", extra=LOOPBACK)
        self.stack.callback(spark.stop)
        self.imported = Imported()
        self.agents: list[SubscriberAgent] = []
        for s in settings:
            agent = SubscriberAgent(s, journal, DeltaStore(spark.newSession(), s.store_path))
            self.imported.wrap(agent)
            agent.start()
            self.stack.callback(agent.stop)
            self.agents.append(agent)
        view = AgentsView(self.agents)
        reads = ReadApi(view, None, None)
        self.stack.callback(reads.close)
        server = HealthServer(view.health, view.ready, view.metrics, reads=reads)
        server.start()
        self.stack.callback(server.stop)
        self.url = server.url

    def send(self, path: str) -> Sent:
        created = int(time.time() * 1000)
        pkg = package(uuid.uuid4().hex, m.ReqType.ADD, [(path, False)], [node(path, t=path)])
        offset = send_package(self.journal, self.js, pkg)
        return Sent(offset, path, created)

    def drained(self, offset: int) -> None:
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while any(a.processed_offset < offset for a in self.agents):
            if time.monotonic() > deadline:
                raise SystemExit(f"the subscribers did not import offset {offset} in time")
            time.sleep(0.05)


def stream(fleet: Fleet, label: str, rate: float, seconds: float, sent: list[Sent]) -> None:
    count = int(rate * seconds)
    log(f"{label}: {count} packages at {rate}/s")
    started = time.perf_counter()
    for i in range(count):
        delay = started + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        sent.append(fleet.send(f"/bench/{label}/p{i}"))


@contextlib.contextmanager
def random_reads(
    url: str, agents: list[str], paths: list[str], per_s: float
) -> Iterator[list[float]]:
    """Node reads at ``per_s`` over HTTP from one client; yields their latencies."""
    latencies: list[float] = []
    stop = threading.Event()

    def run() -> None:
        rng = random.Random(7)
        with httpx.Client(base_url=url, timeout=30) as http:
            started = time.perf_counter()
            for i in range(10**9):
                delay = started + i / per_s - time.perf_counter()
                if stop.wait(max(0.0, delay)):
                    return
                t0 = time.perf_counter()
                http.get(f"/agents/{rng.choice(agents)}/content{rng.choice(paths)}")
                latencies.append(time.perf_counter() - t0)

    thread = threading.Thread(target=run, name="reads")
    thread.start()
    try:
        yield latencies
    finally:
        stop.set()
        thread.join()


def serve_watch(
    url: str,
    agent: str,
    sent: list[Sent],
    poll_s: float,
    served: dict[int, float],
    done: threading.Event,
) -> None:
    """Ask ``agent`` for each sent page in turn until it answers 200; note when."""
    with httpx.Client(base_url=f"{url}/agents/{agent}", timeout=30) as http:
        index = 0
        while True:
            if index >= len(sent):
                if done.is_set():
                    return
                time.sleep(poll_s)
                continue
            item = sent[index]
            deadline = time.monotonic() + SERVE_TIMEOUT_S
            while http.head(f"/content{item.path}").status_code != 200:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{agent} never served {item.path}")
                time.sleep(poll_s)
            served[item.offset] = time.time() * 1000
            index += 1


def imported_latencies(fleet: Fleet, sent: list[Sent]) -> list[float]:
    """Publish -> imported by every subscriber, per package."""
    return [
        (max(fleet.imported.at_ms[a.name][s.offset] for a in fleet.agents) - s.created_ms) / 1000
        for s in sent
    ]


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    prefix = f"bench-served-{uuid.uuid4().hex[:8]}"
    if args.bootstrap:
        kinds = ("package", "status", "discovery", "command", "event")
        topics = TopicSettings.model_validate({k: f"{prefix}.{k}" for k in kinds})
        js = JournalSettings(backend="kafka", bootstrap_servers=args.bootstrap, topics=topics)
    else:
        js = JournalSettings(backend="sqlite", sqlite_path=work / "journal.db")
    with open_journal(js) as journal:
        journal.create_topics(topic_specs(js))
        fleet = Fleet(journal, js, work)
        try:
            log("starting: the subscribers open their stores and read models")
            warm = [fleet.send(f"/bench/warm/p{i}") for i in range(WARMUP_PACKAGES)]
            fleet.drained(warm[-1].offset)
            result: dict[str, Any] = {"subscribers": SUBSCRIBERS, "rate_per_s": args.rate}

            quiet: list[Sent] = []
            stream(fleet, "quiet", args.rate, args.seconds, quiet)
            fleet.drained(quiet[-1].offset)
            result["quiet"] = {"imported": spread(imported_latencies(fleet, quiet))}

            beside: list[Sent] = []
            names = [a.name for a in fleet.agents]
            with random_reads(fleet.url, names, [s.path for s in quiet], args.reads_per_s) as lat:
                stream(fleet, "reads", args.rate, args.seconds, beside)
                fleet.drained(beside[-1].offset)
            result["reads"] = {
                "reads": len(lat),
                "read": spread(lat),
                "imported": spread(imported_latencies(fleet, beside)),
            }
            result["reads"]["imports_p99_vs_quiet"] = round(
                result["reads"]["imported"]["p99_s"] / result["quiet"]["imported"]["p99_s"], 2
            )

            watched: list[Sent] = []
            served: dict[str, dict[int, float]] = {a.name: {} for a in fleet.agents}
            done = threading.Event()
            watchers = [
                threading.Thread(
                    target=serve_watch,
                    args=(fleet.url, a.name, watched, args.poll_ms / 1000, served[a.name], done),
                )
                for a in fleet.agents
            ]
            for w in watchers:
                w.start()
            stream(fleet, "served", args.rate, args.seconds, watched)
            done.set()
            for w in watchers:
                w.join(SERVE_TIMEOUT_S * 2)
            fleet.drained(watched[-1].offset)
            imported = imported_latencies(fleet, watched)
            serving = [
                (max(served[a.name][s.offset] for a in fleet.agents) - s.created_ms) / 1000
                for s in watched
            ]
            result["served"] = {
                "poll_ms": args.poll_ms,
                "imported": spread(imported),
                "served": spread(serving),
                "served_p50_vs_imported": round(
                    percentile(serving, 50) / percentile(imported, 50), 2
                ),
            }
            return result
        finally:
            fleet.stack.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="Kafka; default: the embedded journal")
    parser.add_argument("--rate", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--reads-per-s", type=float, default=50.0)
    parser.add_argument("--poll-ms", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="scd-bench-served-") as tmp:
        result = run(args, Path(tmp))
    result["machine"] = {"cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 1)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
