"""End to end: a publisher daemon and three subscriber daemons as processes on the real Kafka
broker, the real S3 server and real Spark/Delta stores, started by deploy/cluster.sh (the
launcher the README documents) and driven through the REST API only.

One cluster serves the whole module (each Spark JVM costs 10-40 s to start); the tests run in
order and each checks the system's invariants on everything distributed so far:
1. 500 mixed packages (some spilled), a subscriber that starts late from earliest: every store
   equals the reference model, queues drain, one event per package;
2. the Kafka broker restarts during distribution: 503 while it is down, nothing accepted is
   lost, the daemons recover by themselves;
3. the S3 server is down for 30 s: spilled distributes get 503, subscribers retry the spilled
   packages already on the log and import them once S3 is back;
4. SIGTERM of the publisher and of every subscriber under load: each exits 0, no accepted
   package is lost, none applied twice (Delta history offset ranges contiguous), the store says
   its offset (SIGKILL under load, of a subscriber in the middle of an import and of the
   publisher, is the container tests' crash faults, tests/containers/test_faults.py, and at
   random moments of a subscriber's life tests/subscriber/integration/test_crash.py);
5. 100 subscribers (98 simulated through the journal, the 3 real ones): /queues stays correct
   through discovery and imports (its latency is reported; bench/subscriber_hundred.py measures it).

The subscribers: subscriber-1, "editable" (editable, max_retries=2), subscriber-2, "blocking"
(max_retries=-1, non-editable) and subscriber-3, "late" (started after half of test 1's
packages, reset=earliest). Each test can also run alone: whatever is not running is started
first.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import os
import random
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest

from journal.settings import TopicSettings
from runtime.stats import percentile
from subscriber.store.delta import DeltaStore
from tests import services
from tests.cluster_script import ClusterScript
from tests.e2e.cluster import (
    TOKEN,
    Cluster,
    Load,
    Outcome,
    Subscriber,
    SubscriberSpec,
    status_counts,
)
from tests.e2e.workload import ContentModel, Workload, content_differences, stored_summary
from tests.publisher.simulate import SimulatedSubscriber
from tests.services import KafkaService, S3Service
from tests.waiting import wait_for


@pytest.fixture(scope="module")
def kafka_service(own_kafka: KafkaService) -> KafkaService:
    """A test here stops the broker: this module's own, not the shared one."""
    return own_kafka


@pytest.fixture(scope="module")
def s3_service(own_s3: S3Service) -> S3Service:
    """A test here stops the S3 server: this module's own, not the shared one."""
    return own_s3


pytestmark = [pytest.mark.integration, pytest.mark.slow]

# Two retries of the editable subscriber span 16 + 32 s: longer than the S3 outage of test 3
# plus the server's restart, so it imports the spilled packages instead of giving up on them
# (giving up is its policy, but would make its content differ from the others').
S3_OUTAGE_S = 30.0
EDITABLE = SubscriberSpec(1, editable=True, max_retries=2, retry_initial_s=16.0, retry_max_s=60.0)
BLOCKING = SubscriberSpec(2, max_retries=-1)
LATE = SubscriberSpec(3, reset="earliest")

PACKAGES = 500
# Requests per second of the background load of tests 2, 4 and 5.
LOAD_RATE = 5.0
DISTRIBUTE_THREADS = 4
# The publisher waits this long for Kafka's acknowledgement before answering 503.
SEND_TIMEOUT_S = 5
# Broker down between stop and start (stop and start take seconds of their own on top): long
# enough that each load thread sends at least one request that starts and times out inside it.
KAFKA_OUTAGE_S = 2.0 * SEND_TIMEOUT_S + 2.0
# Packages imported by every subscriber after a fault: a Delta commit per batch takes about a
# second, a Spark JVM start 10-40 s, a loaded machine several times that.
CONVERGE_TIMEOUT_S = 600.0
EVENTS_TIMEOUT_S = 120.0
SIMULATED_SUBSCRIBERS = 98
# How long a daemon may take to exit after a signal: a subscriber finishes the import in
# progress (up to 60 s) and stops Spark; the publisher lets requests answer for up to 35 s.
SUBSCRIBER_STOP_TIMEOUT_S = 120.0
PUBLISHER_STOP_TIMEOUT_S = 60.0
# GET /queues calls of the 100-subscriber test: their answers are checked, their latency only
# reported (bench/subscriber_hundred.py measures it; two busy cores make any bound here flaky).
QUEUE_CALLS = 200
# Faster than the defaults so that queues and events follow within seconds.
ANNOUNCE_INTERVAL_S = "2"
VIEW_REFRESH_S = "0.5"
TEST_TIMEOUT_S = 1500
# Log lines shown of a subscriber that did not converge: enough for its thread stacks.
STACK_DUMP_LINES = 150


def summary(capsys: pytest.CaptureFixture[str], text: str) -> None:
    """One line for the test report, shown even when output is captured."""
    with capsys.disabled():
        print(f"\n[e2e] {text}", file=sys.stderr)


# ---------------------------------------------------------------- the cluster


@dataclass
class Run:
    """The module's cluster and everything distributed through it."""

    cluster: Cluster
    workload: Workload
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def outcomes(self) -> list[Outcome]:
        return self.cluster.outcomes

    def distribute(self, kind: str | None = None, *, spill: bool | None = None) -> Outcome:
        with self.lock:
            request = self.workload.next(kind, spill=spill)
        return self.cluster.distribute(request.seq, request.body())


def _delete_bucket(s3: S3Service, bucket: str) -> None:
    client = services.s3_client(s3)
    try:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for item in page.get("Contents", []):
                client.delete_object(Bucket=bucket, Key=item["Key"])
        client.delete_bucket(Bucket=bucket)
    except Exception as exc:  # the server may be down after a failed test: leave the bucket
        print(f"could not delete bucket {bucket}: {exc}", file=sys.stderr)


@pytest.fixture(scope="module")
def run(
    kafka_service: KafkaService, s3_service: S3Service, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Run]:
    name = services.unique_name("e2e-cluster")
    specs = [EDITABLE, BLOCKING, LATE]
    settings = {
        "SCD_JOURNAL_SEND_TIMEOUT_S": str(SEND_TIMEOUT_S),
        "SCD_BLOB_CREATE_BUCKET": "true",
        "SCD_PUBLISHER_API_TOKEN": TOKEN,
        "SCD_PUBLISHER_AGENT_NAME": name,
        "SCD_PUBLISHER_INSTANCE_ID": "e2e-publisher",
        "SCD_PUBLISHER_VIEW_REFRESH_S": VIEW_REFRESH_S,
        "SCD_SUBSCRIBER_ANNOUNCE_INTERVAL_S": ANNOUNCE_INTERVAL_S,
    }
    for spec in specs:
        settings.update(spec.settings())
    script = ClusterScript.configure(
        tmp_path_factory.mktemp("e2e-cluster"),
        name,
        kafka_service,
        s3_service,
        len(specs),
        settings,
    )
    cluster = Cluster(script, name, services.unique_topics(name), kafka_service.bootstrap, specs)
    try:
        script.up("publisher", EDITABLE.name, BLOCKING.name)

        # Events start after the minimum offset the leader first sees: wait until it has seen
        # both subscribers at -1, so that every package gets its event.
        def events_ready() -> bool:
            agent = cluster.get("/agent")
            return bool(agent["leader"]) and agent["lastEventOffset"] == -1

        wait_for(events_ready, 120, "the publisher to lead and start events at offset -1")
        yield Run(cluster, Workload(seed=20240501))
    finally:
        try:
            down = script.down()
            assert down.returncode == 0, down.stdout + down.stderr
        finally:
            cluster.close()
            _delete_bucket(s3_service, script.env["SCD_BLOB_BUCKET"])


# ---------------------------------------------------------------- checks


def wait_converged(cluster: Cluster, timeout_s: float = CONVERGE_TIMEOUT_S) -> int:
    """Wait until every subscriber processed the last package and every queue is empty;
    returns the last package offset."""
    last = cluster.last_package_offset()
    names = sorted(cluster.subscribers)
    deadline = time.monotonic() + timeout_s
    state: Any = None
    while time.monotonic() < deadline:
        offsets = {n: cluster.subscribers[n].processed_offset() for n in names}
        queues = {
            q["subscriberAgentName"]: q["size"]
            for q in cluster.get("/queues")
            if q["subscriberAgentName"] in cluster.subscribers
        }
        state = {"offsets": offsets, "queue sizes": queues}
        # None: nothing processed yet, which is converged on an empty log (last = -1).
        done = all((-1 if o is None else o) == last for o in offsets.values())
        if done and queues == dict.fromkeys(names, 0):
            return last
        for name in names:
            if not cluster.subscribers[name].process.alive:
                raise AssertionError(
                    f"{name} exited\n" + cluster.subscribers[name].process.log_tail()
                )
        time.sleep(1.0)
    # Where the ones behind wait: their thread stacks at the end of their logs.
    behind = [
        cluster.subscribers[n].process
        for n in names
        if (-1 if state["offsets"][n] is None else state["offsets"][n]) != last
    ]
    for daemon in behind:
        daemon.dump_stacks()
    time.sleep(1.0)
    tails = "\n".join(
        s.process.log_tail(STACK_DUMP_LINES if s.process in behind else 15)
        for s in cluster.subscribers.values()
    )
    raise AssertionError(
        f"not converged on offset {last} within {timeout_s:.0f} s: {state}\n{tails}"
    )


def check_log(run: Run) -> ContentModel:
    """Every accepted request is on the log at the offset it was given; the model of the log."""
    cluster = run.cluster
    packages = cluster.packages()
    # In offset order, each once; the leader's transaction markers take the offsets between.
    offsets = [p.offset for p in packages]
    assert offsets == sorted(set(offsets)), "the package topic is out of order"
    unknown = [p for p in packages if p.seq is None or p.seq not in run.workload.requests]
    assert not unknown, f"packages the tests did not send: {unknown[:3]}"
    on_log = {p.seq: p.offset for p in packages}
    twice = [seq for seq, n in Counter(p.seq for p in packages).items() if n > 1]
    assert not twice, f"requests on the log more than once: {twice[:10]}"
    for seq, offset in cluster.accepted().items():
        assert on_log.get(seq) == offset, (
            f"request {seq} was accepted at offset {offset} but the log has it at {on_log.get(seq)}"
        )
    return ContentModel.of(
        (p.offset, run.workload.requests[p.seq]) for p in packages if p.seq is not None
    )


def check_events(cluster: Cluster, last: int) -> int:
    """Exactly one distributed event per package offset up to ``last``; returns their number."""
    packages = {p.offset for p in cluster.packages() if p.offset <= last}

    def complete() -> list[dict[str, Any]] | None:
        events = cluster.events()
        return events if any(e["offset"] == last for e in events) else None

    events = wait_for(complete, EVENTS_TIMEOUT_S, f"the distributed event of offset {last}")
    counts = Counter(int(e["offset"]) for e in events)
    duplicates = sorted(o for o, n in counts.items() if n > 1)
    missing = sorted(packages - set(counts))
    assert not duplicates, f"events sent more than once for offsets {duplicates[:20]}"
    assert not missing, f"no event for offsets {missing[:20]} ({len(missing)} in all)"
    assert set(counts) == packages, f"events of no package: {sorted(set(counts) - packages)[:20]}"
    return len(events)


def check_store(spark: Any, subscriber: Subscriber, model: ContentModel, last: int) -> int:
    """The store holds the model's content, its Delta history applies each offset once (import
    commits cover non-overlapping offset ranges) and it says it reflects ``last``.
    Returns the number of import commits."""
    name = subscriber.spec.name
    location = str(subscriber.store)
    store = DeltaStore(spark, location)
    nodes = {n.path: stored_summary(n) for n in store.nodes()}
    differences = content_differences(model, nodes)
    assert not differences, f"{name}'s content differs from the model:\n" + "\n".join(differences)
    ranges = [
        (int(h["metadata"]["offsets"][0]), int(h["metadata"]["offsets"][1]), h["version"])
        for h in store.history()
        if h["metadata"] and "offsets" in h["metadata"]
    ]
    assert ranges, f"{name}: no import commit in the Delta history"
    for (_, prev_last, prev_version), (first, _, version) in itertools.pairwise(ranges):
        # Never twice; offsets between two commits are the leader's transaction markers (a
        # package skipped there would show in the content compared with the model).
        assert first > prev_last, (
            f"{name}: commit {version} starts at offset {first} after commit {prev_version} "
            f"ended at {prev_last} (applied twice)"
        )
    assert ranges[0][0] == -1, f"{name}: history starts at offset {ranges[0][0]}, not -1"
    assert ranges[-1][1] == last, f"{name}: last import commit ends at {ranges[-1][1]}"
    row = spark.sql(
        f"SELECT max(offset) AS processed FROM delta.`{location}` WHERE kind = 'offset'"
    ).first()
    assert row["processed"] == last, f"{name}: store reflects offset {row['processed']}"
    return len(ranges)


def check_all(run: Run, spark: Any) -> tuple[int, dict[str, int]]:
    """Converged, every invariant checked; (last offset, import commits per subscriber)."""
    last = wait_converged(run.cluster)
    model = check_log(run)
    commits = {
        name: check_store(spark, subscriber, model, last)
        for name, subscriber in sorted(run.cluster.subscribers.items())
    }
    check_events(run.cluster, last)
    return last, commits


def counted(outcomes: list[Outcome]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in status_counts(outcomes).items())


def background(run: Run, threads: int = 2) -> Load:
    """Random packages from ``threads`` threads until the block ends, at most LOAD_RATE
    requests per second in all: enough to keep every subscriber importing, few enough that
    catching up after minutes of restarts stays quick."""
    return Load(run, threads, LOAD_RATE)


# ---------------------------------------------------------------- 1. the native cluster


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_500_packages_reach_three_subscribers_once_each(
    run: Run, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = run.cluster
    late = cluster.subscribers[LATE.name]
    assert not late.process.alive, "this test starts the late subscriber itself: run it first"
    started = time.monotonic()
    with run.lock:
        # Every 20th package (5%) is a deep ADD large enough to spill.
        requests = [
            run.workload.next("add-deep", spill=True)
            if i % 20 == 10
            else run.workload.next(spill=False)
            for i in range(PACKAGES)
        ]
    half = PACKAGES // 2

    def send(index: int) -> Outcome:
        return cluster.distribute(requests[index].seq, requests[index].body())

    with ThreadPoolExecutor(DISTRIBUTE_THREADS) as pool:
        outcomes = list(pool.map(send, range(half)))
        # `up` starts what is not running, the late subscriber: from earliest, while the
        # second half is distributed.
        late_up = cluster.script.start("up")
        outcomes += list(pool.map(send, range(half, PACKAGES)))
    distributed_s = time.monotonic() - started
    refused = [o for o in outcomes if o.status != 200]
    assert not refused, f"refused: {refused[:3]}"
    spilled = {o.seq for o in outcomes if o.spilled}
    assert spilled == {r.seq for r in requests if r.spill}, "spilled packages differ from plan"
    actions = Counter(r.action for r in requests)

    up = cluster.script.finish(late_up)
    assert up.returncode == 0, up.stdout + up.stderr
    last = wait_converged(cluster)
    converged_s = time.monotonic() - started
    queues = cluster.get("/queues")
    assert sorted(q["subscriberAgentName"] for q in queues) == sorted(cluster.subscribers)
    assert all(q["state"] == "IDLE" and q["size"] == 0 for q in queues), queues
    config = {s["agentName"]: (s["editable"], s["maxRetries"]) for s in cluster.get("/subscribers")}
    assert config == {
        EDITABLE.name: (True, 2),
        BLOCKING.name: (False, -1),
        LATE.name: (False, -1),
    }

    model = check_log(run)
    assert len(run.cluster.packages()) == PACKAGES
    assert last == run.cluster.last_package_offset()
    commits = {
        n: check_store(spark, s, model, last) for n, s in sorted(cluster.subscribers.items())
    }
    events = check_events(cluster, last)
    latencies = [o.seconds for o in outcomes]
    summary(
        capsys,
        f"native cluster: {PACKAGES} packages ({actions['ADD']} ADD, {actions['DELETE']} "
        f"DELETE, {len(spilled)} spilled) distributed in {distributed_s:.1f} s "
        f"(distribute p50 {percentile(latencies, 50) * 1000:.0f} ms, "
        f"p99 {percentile(latencies, 99) * 1000:.0f} ms); all 3 stores equal the model "
        f"({len(model.tree)} nodes) {converged_s:.1f} s after the first request; import commits "
        f"{commits}; {events} events, one per package",
    )


# ---------------------------------------------------------------- 2. Kafka broker restart


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_kafka_broker_restart_loses_no_accepted_package(
    run: Run,
    kafka_service: KafkaService,
    spark: Any,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The test's own Kafka clients report every refused connection while the broker is down.
    caplog.set_level(logging.ERROR, logger="journal.kafka.errors")
    cluster = run.cluster
    cluster.ensure_running()
    wait_converged(cluster)
    pids = {"publisher": cluster.publisher.pid} | {
        n: s.process.pid for n, s in cluster.subscribers.items()
    }
    started = time.monotonic()
    with background(run, threads=3) as load:
        load.wait_accepted(20, "before the broker stops")
        try:
            kafka_service.stop()
            down_at = time.monotonic()
            time.sleep(KAFKA_OUTAGE_S)
            up_at = time.monotonic()
        finally:
            kafka_service.start()
        back_at = time.monotonic()
        load.wait_accepted(20, "after the broker restart (did the publisher recover?)")
    outcomes = load.outcomes()
    during = [o for o in outcomes if o.started >= down_at and o.started + o.seconds <= up_at]
    refused = [o for o in outcomes if o.status == 503]
    assert refused, f"no request was refused while the broker was down ({counted(outcomes)})"
    assert during, "no request was sent and answered while the broker was down"
    assert all(o.status == 503 for o in during), f"during the outage: {counted(during)}"
    assert all(o.status in (200, 503) for o in outcomes), counted(outcomes)
    unexplained = [o for o in refused if "Kafka" not in o.message and "journal" not in o.message]
    assert not unexplained, unexplained

    last, _ = check_all(run, spark)
    now = {"publisher": cluster.publisher.pid} | {
        n: s.process.pid for n, s in cluster.subscribers.items()
    }
    assert now == pids, "a daemon was restarted"
    on_log = {p.seq for p in cluster.packages()}
    refused_on_log = sum(1 for o in refused if o.seq in on_log)
    summary(
        capsys,
        f"Kafka restart: {len(outcomes)} requests ({counted(outcomes)}; {len(during)} "
        f"sent and answered while the broker was down, all 503), broker down "
        f"{back_at - down_at:.1f} s (stop to ready); {refused_on_log} refused requests reached "
        f"the log anyway (send timed out late); every accepted package imported by all 3 up to "
        f"offset {last}; no daemon restarted; {time.monotonic() - started:.1f} s",
    )


# ---------------------------------------------------------------- 3. S3 outage


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_s3_outage_refuses_spills_and_subscribers_retry_blobs(
    run: Run, s3_service: S3Service, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = run.cluster
    cluster.ensure_running()
    wait_converged(cluster)
    started = time.monotonic()
    subscribers = list(cluster.subscribers.values())
    paused: list[Subscriber] = []
    on_log_first: list[Outcome] = []
    during: list[Outcome] = []
    states: dict[str, set[str]] = {s.spec.name: set() for s in subscribers}
    try:
        # Suspended subscribers cannot fetch the spilled packages before S3 goes down.
        for subscriber in subscribers:
            os.kill(subscriber.process.pid, signal.SIGSTOP)
            paused.append(subscriber)
        for _ in range(3):
            on_log_first.append(run.distribute("add-deep", spill=True))
            on_log_first.append(run.distribute("add-shallow", spill=False))
        assert all(o.status == 200 for o in on_log_first), on_log_first
        assert [o.spilled for o in on_log_first] == [True, False] * 3
        try:
            s3_service.stop()
            down_at = time.monotonic()
            for subscriber in paused:
                os.kill(subscriber.process.pid, signal.SIGCONT)
            paused.clear()
            while time.monotonic() < down_at + S3_OUTAGE_S:
                during.append(run.distribute("add-deep", spill=True))
                during.append(run.distribute("add-shallow", spill=False))
                for subscriber in subscribers:
                    health = subscriber.health()
                    if health:
                        states[subscriber.spec.name].add(health["state"])
                time.sleep(2.0)
        finally:
            s3_service.start()
        back_at = time.monotonic()
    finally:
        for subscriber in paused:
            os.kill(subscriber.process.pid, signal.SIGCONT)
    # Spilled packages, and small ones with a binary above the threshold, need the blob store.
    needs_blobs = [run.workload.requests[o.seq].needs_blob_store for o in during]
    spills = [o for o, needs in zip(during, needs_blobs, strict=True) if needs]
    small = [o for o, needs in zip(during, needs_blobs, strict=True) if not needs]
    assert all(o.status == 503 for o in spills), (
        f"needed the blob store during the outage: {spills}"
    )
    assert all("blob store" in o.message.lower() for o in spills), spills[0].message
    # Small packages need no blob store: the journal keeps accepting them.
    assert small, "every small package drawn during the outage carried a large binary"
    assert all(o.status == 200 and not o.spilled for o in small), small
    assert "BLOCKED" in states[BLOCKING.name], states
    assert "RETRYING" in states[EDITABLE.name], states

    last, _ = check_all(run, spark)
    errors = {q["subscriberAgentName"]: q["errorQueueSize"] for q in cluster.get("/queues")}
    assert errors[EDITABLE.name] == 0, f"the editable subscriber gave up on a package: {errors}"
    first_spill = min(o.offset for o in on_log_first if o.spilled and o.offset is not None)
    summary(
        capsys,
        f"S3 outage: down {back_at - down_at:.1f} s; {len(spills)} spilled distributes refused "
        f"with 503 ({spills[0].message[:90]!r}), {len(during) - len(spills)} small ones "
        f"accepted; spilled packages from offset {first_spill} on the log were retried "
        f"(states seen {states}) and imported by all 3 after S3 came back; converged at "
        f"offset {last} {time.monotonic() - back_at:.1f} s after; "
        f"{time.monotonic() - started:.1f} s",
    )


# ---------------------------------------------------------------- 4. SIGTERM


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_sigterm_of_every_daemon_under_load(
    run: Run, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = run.cluster
    cluster.ensure_running()
    started = time.monotonic()
    exits: dict[str, int] = {}
    names = sorted(cluster.subscribers)
    with background(run, threads=2) as load:
        load.wait_accepted(30, "before the signals")
        # Staggered, while packages keep arriving and the subscribers keep committing.
        for index, daemon in enumerate(
            [cluster.subscribers[names[0]].process, cluster.publisher]
            + [cluster.subscribers[n].process for n in names[1:]]
        ):
            time.sleep(1.0 + index * 0.7)
            daemon.signal(signal.SIGTERM)
        exits["publisher"] = cluster.publisher.wait(PUBLISHER_STOP_TIMEOUT_S)
        for name in names:
            exits[name] = cluster.subscribers[name].process.wait(SUBSCRIBER_STOP_TIMEOUT_S)
        cluster.ensure_running()
        load.wait_accepted(20, "after the restarts")
    outcomes = load.outcomes()
    for name, code in exits.items():
        assert code == 0, f"{name} exited with {code} after SIGTERM"
    last, commits = check_all(run, spark)
    unanswered = [o for o in outcomes if o.status is None]
    on_log = {p.seq for p in cluster.packages()}
    summary(
        capsys,
        f"SIGTERM of the publisher and the 3 subscribers under load: "
        f"{len(outcomes)} requests ({counted(outcomes)}; "
        f"{sum(1 for o in unanswered if o.seq in on_log)} unanswered ones reached the log), "
        f"exit codes {exits}; after restart all accepted packages imported once each up to "
        f"offset {last}, history ranges contiguous (commits {commits}); "
        f"{time.monotonic() - started:.1f} s",
    )


# ---------------------------------------------------------------- 5. 100 subscribers


def check_queues(
    queues: list[dict[str, Any]], total: int, offsets: dict[str, int], packages: list[int]
) -> int:
    """One GET /queues answer is consistent with the package offsets on the log (``packages``,
    read after the answer, so a superset of what it saw); returns the last package it shows.
    Package offsets are not consecutive: the leader's transaction markers sit between them."""
    assert len(queues) == total, f"{len(queues)} queues, expected {total}"

    def top(q: dict[str, Any]) -> int:
        # The size-th package after the processed offset: the last package of the queue.
        size = int(q["size"])
        first = bisect.bisect_right(packages, q["processedOffset"])
        assert first + size <= len(packages), q
        return packages[first + size - 1]

    # Every queue is a view of the same log: each non-empty one ends at the same package.
    tops = {top(q) for q in queues if q["size"] > 0}
    assert len(tops) <= 1, f"queues disagree on the last package: {sorted(tops)}"
    last = tops.pop() if tops else max(int(q["processedOffset"]) for q in queues)
    for q in queues:
        if q["name"] in offsets:
            assert q["processedOffset"] == offsets[q["name"]], q
        assert (q["state"] == "IDLE") == (q["size"] == 0), q
        assert q["size"] == packages_between(packages, q["processedOffset"], last), (q, last)
    return last


def packages_between(packages: list[int], after: int, upto: int) -> int:
    """How many of the (sorted) package offsets are in (after, upto]."""
    return max(0, bisect.bisect_right(packages, upto) - bisect.bisect_right(packages, after))


def timed_health(cluster: Cluster) -> float:
    begin = time.perf_counter()
    answer = cluster.http.get("/health")
    elapsed = time.perf_counter() - begin
    assert answer.status_code == 200, answer.text
    return elapsed


def timed_queues(cluster: Cluster) -> tuple[float, list[dict[str, Any]]]:
    begin = time.perf_counter()
    answer = cluster.http.get("/queues", params={"limit": 1000})  # 101 queues: one page
    elapsed = time.perf_counter() - begin
    assert answer.status_code == 200, answer.text
    return elapsed, answer.json()


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_queue_api_with_100_subscribers(run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = run.cluster
    cluster.ensure_running()
    wait_converged(cluster)
    started = time.monotonic()
    latest = cluster.latest_offset()
    packages = [p.offset for p in cluster.packages()]
    rng = random.Random(100)
    topics = TopicSettings.model_validate(cluster.topics)
    simulated = [
        SimulatedSubscriber(
            cluster.journal,
            topics,
            f"sim-{i:03d}",
            agent_name=f"sim-{i:03d}",
            pub_agent_name=cluster.agent_name,
            editable=i % 2 == 0,
            max_retries=-1 if i % 3 else 2,
        )
        for i in range(SIMULATED_SUBSCRIBERS)
    ]
    offsets = {s.queue_name: rng.randrange(-1, latest) for s in simulated}
    stop = threading.Event()

    def announce() -> None:
        while not stop.is_set():
            for sim in simulated:
                sim.announce(offsets[sim.queue_name])
            stop.wait(5.0)

    announcer = threading.Thread(target=announce, name="simulated-announcer", daemon=True)
    announcer.start()
    total = SIMULATED_SUBSCRIBERS + len(cluster.subscribers)
    steady: list[float] = []
    baseline: list[float] = []
    busy: list[float] = []
    heads: list[int] = []
    try:
        wait_for(lambda: len(cluster.get("/queues?limit=1000")) == total, 120, f"{total} queues")
        # 100 subscribers announcing, nothing distributed: exact sizes, and the latency.
        for _ in range(QUEUE_CALLS):
            baseline.append(timed_health(cluster))
            elapsed, queues = timed_queues(cluster)
            steady.append(elapsed)
            assert check_queues(queues, total, offsets, packages) == packages[-1]
            time.sleep(0.02)
        # While packages arrive and the real subscribers import them: still consistent.
        answers: list[list[dict[str, Any]]] = []
        with background(run, threads=1) as load:
            for _ in range(QUEUE_CALLS // 2):
                elapsed, queues = timed_queues(cluster)
                busy.append(elapsed)
                answers.append(queues)
                time.sleep(0.05)
            accepted = sum(1 for o in load.outcomes() if o.status == 200)
        last = wait_converged(cluster)
        packages = [p.offset for p in cluster.packages()]
        heads = [check_queues(queues, total, offsets, packages) for queues in answers]
        assert heads == sorted(heads), "the last package went backwards"
        final = {q["name"]: q for q in cluster.get("/queues?limit=1000")}
        for name, offset in offsets.items():
            expected = packages_between(packages, offset, last)
            assert final[name]["size"] == expected, (name, offset, last, final[name])
    finally:
        stop.set()
        announcer.join(30)

    def ms(values: list[float], share: float) -> str:
        return f"{percentile(values, share * 100) * 1000:.1f}"

    summary(
        capsys,
        f"{total} subscribers ({SIMULATED_SUBSCRIBERS} simulated + {len(cluster.subscribers)} "
        f"real): GET /queues x{len(steady)} p50 {ms(steady, 0.5)} ms, p99 {ms(steady, 0.99)} "
        f"ms, max {max(steady) * 1000:.1f} ms (GET /health in the same loop: p50 "
        f"{ms(baseline, 0.5)} ms, p99 {ms(baseline, 0.99)} ms); x{len(busy)} while {accepted} "
        f"packages were "
        f"distributed and imported: p50 {ms(busy, 0.5)} ms, p99 {ms(busy, 0.99)} ms; every "
        f"queue's size = the packages after its offset; {time.monotonic() - started:.1f} s",
    )
