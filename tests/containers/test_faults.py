"""Faults between real hosts: every container has its own network stack, so each fault below
crosses the engine's bridge network, under a steady background of distribute requests:

* a hang: Kafka paused 40 s, then the S3 server paused 40 s (connections stay open, nothing
  answers);
* a partition: one subscriber disconnected from the network for 60 s, then reconnected;
* a partition of the leading publisher replica from Kafka for 30 s (off the default network,
  still on the publishers' own: clients and the other replica reach it), clients sending
  round-robin to both replicas and a refused request again to the other;
* a crash: `docker compose kill` of a subscriber in the middle of an import, then `start`;
  the same for the publisher;
* a slow link: 200 ms +- 50 ms delay and 2% loss on one subscriber's outgoing packets
  (tests/containers/slow_link.py: NFQUEUE, as these kernels have no netem), and the report
  says so.

For each: every distribute answers within its bound (an answer or an error, never a hang),
every /health that is not the fault's own keeps answering, no container other than the one
killed restarts, and the time from the fault's end until each subscriber imports a package
distributed after it is measured and reported. After the last fault (the module's last test)
all three stores equal the model of the log and their Delta logs import each offset once.
"""

from __future__ import annotations

import re
import secrets
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from publisher.client import PublisherClient
from publisher.errors import PublisherUnreachable
from subscriber.store.delta import DeltaStore
from tests.containers import checks
from tests.containers.compose import (
    DEFAULT_NETWORK,
    KAFKA,
    KAFKA_PORT,
    PUBLISHER,
    PUBLISHER_API_PORT,
    PUBLISHERS,
    SUBSCRIBERS,
    ComposeCluster,
)
from tests.containers.conftest import Report
from tests.containers.driving import (
    RETRIED,
    RUN_KEY,
    Distributor,
    HealthWatch,
    load,
    wait_imported,
)
from tests.e2e.cluster import Outcome, status_counts
from tests.e2e.workload import SEQ_KEY, ContentModel, Workload, content_differences, stored_summary
from tests.waiting import wait_for

pytestmark = [pytest.mark.containers, pytest.mark.slow]

HANG_S = 40.0
PARTITION_S = 60.0
# Past the leader election's session timeout (6 s) and a forwarded request's wait for a leader
# (17 s): the other replica leads, the cut-off one finds no leader to forward to.
PUBLISHER_PARTITION_S = 30.0
AGENT = "publish"
# A request that took longer than this through the balancer counts as delayed.
DELAYED_S = 2.0
SLOW_LINK_S = 45.0
# The slow link: 200 ms +- 50 ms on every packet the subscriber sends, 2% of them lost.
SLOW_DELAY_MS, SLOW_JITTER_MS, SLOW_LOSS = 200, 50, 0.02
# A publisher answers 503 once Kafka did not acknowledge within SCD_JOURNAL_SEND_TIMEOUT_S
# (30 s, + 1 s) or a blob store call did not end within SCD_PUBLISHER_BLOB_TIMEOUT_S (30 s);
# a few seconds more for the request's own work on a loaded machine.
DISTRIBUTE_BOUND_S = 30.0 + 5.0
# A killed subscriber starts a new Spark driver, registers with the master and opens its store
# on S3: one to three minutes here, more while CI runs the other tests beside these (a bound
# against a hang; the recovery time itself is reported); everything else recovers in seconds.
RECOVERY_TIMEOUT_S = 600.0
ACCEPT_TIMEOUT_S = 120.0
TEST_TIMEOUT_S = 1500
# Packages distributed at once to catch a subscriber in the middle of an import.
BURST = 20
# Bursts sent at most until one catches the subscriber importing.
CRASH_BURSTS = 5


@dataclass
class FaultRun:
    compose: ComposeCluster
    spark: Any
    distributor: Distributor
    reset_offset: int
    report: Report


@pytest.fixture(scope="module")
def run(compose: ComposeCluster, compose_spark: Any, report: Report) -> Iterator[FaultRun]:
    ep = compose.endpoints()
    distributor = Distributor(ep.publisher_url, ep.token, secrets.token_hex(4), Workload(2121))
    try:
        # The workload's tree starts empty whatever an earlier run left in the stores.
        reset = distributor.post(-1, {"action": "DELETE", "deepPaths": ["/content"]})
        assert reset.status == 200, reset
        assert reset.offset is not None
        for _ in range(10):
            assert distributor.distribute().status == 200
        yield FaultRun(compose, compose_spark, distributor, reset.offset, report)
    finally:
        distributor.close()


# ---------------------------------------------------------------- checks


def verify(run: FaultRun) -> dict[str, Any]:
    """Every subscriber caught up with the log; each request of the run on it once, at the
    offset its answer gave; every store holds the model of the log; each Delta log imports
    every offset once. Returns what it saw."""
    compose, ep = run.compose, run.compose.endpoints()
    started = time.monotonic()
    last = checks.last_package_offset(ep.kafka_bootstrap)
    wait_imported(compose, last, started, RECOVERY_TIMEOUT_S)
    packages = [
        p
        for p in checks.read_packages(ep.kafka_bootstrap, since=run.reset_offset)
        if p.metadata.get(RUN_KEY) == run.distributor.run_id and SEQ_KEY in p.metadata
    ]
    seqs = [int(p.metadata[SEQ_KEY]) for p in packages]
    assert len(seqs) == len(set(seqs)), "a request is on the log more than once"
    on_log = dict(zip(seqs, (p.offset for p in packages), strict=True))
    for outcome in run.distributor.outcomes:
        if outcome.status == 200 and outcome.seq >= 0:
            assert on_log.get(outcome.seq) == outcome.offset, (
                f"request {outcome.seq} accepted at {outcome.offset}, on the log at "
                f"{on_log.get(outcome.seq)}"
            )
    requests = run.distributor.workload.requests
    model = ContentModel.of((offset, requests[seq]) for seq, offset in on_log.items())
    s3 = checks.s3_client(ep)
    commits = {}
    for service in SUBSCRIBERS:
        store = DeltaStore(run.spark, ep.store(service))
        nodes = {n.path: stored_summary(n) for n in store.nodes("/content")}
        differences = content_differences(model, nodes)
        assert not differences, f"{service}'s content differs:\n" + "\n".join(differences)
        log = checks.delta_commits(s3, ep.content_bucket, service)
        commits[service] = checks.check_each_offset_once(service, log, last)
    return {
        "last_offset": last,
        "packages_of_run": len(packages),
        "model_nodes": len(model.tree),
        "import_commits": commits,
        "verify_s": round(time.monotonic() - started, 1),
    }


def starts(compose: ComposeCluster) -> dict[str, str]:
    return {s: compose.container(s).started_at for s in (KAFKA, *PUBLISHERS, *SUBSCRIBERS)}


def check_no_restart(compose: ComposeCluster, before: dict[str, str], *, killed: str = "") -> None:
    after = starts(compose)
    restarted = [s for s in before if s != killed and after[s] != before[s]]
    assert not restarted, f"containers restarted: {restarted}"
    for service in before:
        assert compose.container(service).status == "running", f"{service} is not running"


def check_answers(outcomes: list[Outcome], start: float, end: float) -> dict[str, Any]:
    """Requests sent between ``start`` and ``end`` answered within the bound."""
    during = [o for o in outcomes if start <= o.started <= end]
    assert during, "no request was sent during the fault"
    slow = [o for o in during if o.seconds > DISTRIBUTE_BOUND_S]
    assert not slow, f"distribute took longer than {DISTRIBUTE_BOUND_S} s: {slow[:3]}"
    return {
        "requests": status_counts(during),
        "max_distribute_s": round(max(o.seconds for o in during), 1),
    }


def check_health(watch: HealthWatch, start: float, end: float, skip: tuple[str, ...] = ()) -> None:
    for service in watch.services:
        if service in skip:
            continue
        assert watch.asked(service, start, end) > 0, f"{service}'s /health was not asked"
        missed = watch.unanswered(service, start, end)
        assert not missed, f"{service}'s /health did not answer during the fault: {missed[:3]}"


def recovery(run: FaultRun, fault_end: float) -> dict[str, Any]:
    """From the fault's end: the first request accepted, and each subscriber importing it."""
    marker = run.distributor.until_accepted(ACCEPT_TIMEOUT_S)
    assert marker.offset is not None
    accepted_s = marker.started + marker.seconds - fault_end
    imported = wait_imported(run.compose, marker.offset, fault_end, RECOVERY_TIMEOUT_S)
    return {"accepted_after_s": round(accepted_s, 1), "imported_after_s": imported}


def say(run: FaultRun, capsys: pytest.CaptureFixture[str], name: str, values: Any) -> None:
    run.report.say(capsys, f"fault {name}", values)


# ---------------------------------------------------------------- the faults


def _hang(run: FaultRun, service: str) -> dict[str, Any]:
    compose = run.compose
    before = starts(compose)
    with HealthWatch(compose) as watch, load(run.distributor, threads=2, rate=2.0):
        time.sleep(3.0)
        compose.pause(service)
        start = time.monotonic()
        # Spilled packages need the blob store; the load's own are mostly small.
        with load(run.distributor, threads=1, rate=1.0, kind="add-deep", spill=True):
            try:
                time.sleep(HANG_S)
            finally:
                compose.unpause(service)
            end = time.monotonic()
        result = recovery(run, end)
    result |= check_answers(run.distributor.outcomes, start, end)
    check_health(watch, start, end)
    check_no_restart(compose, before)
    return {"paused_s": round(end - start, 1), **result}


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_hang_of_kafka_then_of_the_s3_server(
    run: FaultRun, capsys: pytest.CaptureFixture[str]
) -> None:
    kafka = _hang(run, KAFKA)
    s3 = _hang(run, run.compose.s3_service())
    say(run, capsys, "hang", {"kafka": kafka, "s3": s3})


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_partition_of_a_subscriber(run: FaultRun, capsys: pytest.CaptureFixture[str]) -> None:
    compose, victim = run.compose, SUBSCRIBERS[1]
    before = starts(compose)
    with HealthWatch(compose) as watch, load(run.distributor):
        time.sleep(3.0)
        networks = compose.disconnect(victim)
        start = time.monotonic()
        try:
            assert compose.container(victim).address is None
            time.sleep(PARTITION_S)
        finally:
            compose.reconnect(victim, networks)
        end = time.monotonic()
        result = recovery(run, end)
    result |= check_answers(run.distributor.outcomes, start, end)
    check_health(watch, start, end)
    check_no_restart(compose, before)
    say(run, capsys, "partition", {"subscriber": victim, **result})


def _leaders(compose: ComposeCluster) -> list[str]:
    """The replicas whose /agent says they lead (those that answer)."""
    ep, found = compose.endpoints(), []
    for service in PUBLISHERS:
        try:
            with PublisherClient(ep.url_of(service), timeout_s=5.0) as api:
                agent = api.agent()
        except PublisherUnreachable:
            continue
        if agent["leader"]:
            found.append(service)
    return found


def _without_requests(log: str, keep: int = 80) -> str:
    """A publisher's last log lines but those of single requests (the access log, forwards)."""
    lines = [line for line in log.splitlines() if not re.search(r"uvicorn\.access|httpx", line)]
    return "\n".join(lines[-keep:])


def _one_leader(compose: ComposeCluster) -> str | None:
    found = _leaders(compose)
    return found[0] if len(found) == 1 else None


def _ready(compose: ComposeCluster, service: str) -> bool:
    with PublisherClient(compose.endpoints().url_of(service), timeout_s=5.0) as api:
        return api.ready()


def _refusals(balanced: Distributor, start: float, victim_url: str) -> dict[str, Any]:
    """From the partition's start: the tries refused (503) or unanswered, on which replica,
    and how long requests through the balancer took."""
    deliveries = [d for d in balanced.deliveries if d.started >= start]
    failed = [(url, o) for d in deliveries for url, o in d.tries if o.status in RETRIED]
    seconds = [d.seconds for d in deliveries]
    acknowledged = sorted(
        o.started + o.seconds for d in deliveries for _, o in d.tries if o.status == 200
    )
    gaps = [b - a for a, b in zip([start, *acknowledged], acknowledged, strict=False)]
    return {
        "requests": len(deliveries),
        "acknowledged": sum(d.acknowledged for d in deliveries),
        "refused_by_every_replica": sum(not d.acknowledged for d in deliveries),
        "tries_failed": {
            "partitioned": status_counts([o for url, o in failed if url == victim_url]),
            "other": status_counts([o for url, o in failed if url != victim_url]),
        },
        "refused_from_s": round(min(o.started for _, o in failed) - start, 1) if failed else None,
        "refused_until_s": (
            round(max(o.started + o.seconds for _, o in failed) - start, 1) if failed else None
        ),
        "delayed_over_2s": sum(s > DELAYED_S for s in seconds),
        "request_p50_s": round(statistics.median(seconds), 2) if seconds else None,
        "request_max_s": round(max(seconds), 1) if seconds else None,
        "longest_without_an_acknowledgement_s": round(max(gaps), 1) if gaps else None,
    }


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_partition_of_the_leading_publisher_from_kafka(
    run: FaultRun, capsys: pytest.CaptureFixture[str]
) -> None:
    """The leading replica loses Kafka (off the default network) for 30 s, still reachable on
    the publishers' own network, while clients send round-robin to both replicas and send a
    request refused or unanswered by one again to the other. Every acknowledged package is on
    the log once, no package id twice, the agent's numbers one by one in log order (every
    subscriber admits every record); the other replica takes the lead; once reconnected the
    cut-off replica serves again and every subscriber imports a package distributed after."""
    compose, ep = run.compose, run.compose.endpoints()
    before = starts(compose)
    victim: str = wait_for(
        lambda: _one_leader(compose), ACCEPT_TIMEOUT_S, "one leading publisher replica"
    )
    other = next(s for s in PUBLISHERS if s != victim)
    balanced = run.distributor.balanced(*ep.publisher_urls)
    direct = run.distributor.balanced(ep.url_of(victim))
    since = checks.latest_offset(ep.kafka_bootstrap)
    seen: dict[str, float] = {}
    try:
        with HealthWatch(compose) as watch, load(balanced, threads=3, rate=3.0):
            time.sleep(3.0)
            networks = compose.disconnect(victim, DEFAULT_NETWORK)
            start = time.monotonic()
            try:
                assert compose.container(victim).address is not None, "off every network"
                assert not compose.connects(victim, KAFKA, KAFKA_PORT), f"{victim} reaches Kafka"
                assert compose.connects(other, victim, PUBLISHER_API_PORT), (
                    f"{other} cannot reach {victim}"
                )
                # The partition's length; meanwhile, when the other leads and the cut-off one
                # stops saying it does.
                while time.monotonic() < start + PUBLISHER_PARTITION_S:
                    leading = _leaders(compose)
                    if other in leading:
                        seen.setdefault("other_leads_s", time.monotonic() - start)
                    if victim not in leading:
                        seen.setdefault("partitioned_stopped_leading_s", time.monotonic() - start)
                    time.sleep(0.5)
                assert compose.connects(other, victim, PUBLISHER_API_PORT), "front was cut"
            finally:
                compose.reconnect(victim, networks)
            end = time.monotonic()
            # Through the partitioned replica alone: it serves again (forwarding to the leader).
            marker = direct.until_accepted(ACCEPT_TIMEOUT_S)
            assert marker.offset is not None
            imported = wait_imported(compose, marker.offset, end, RECOVERY_TIMEOUT_S)
            wait_for(lambda: _ready(compose, victim), ACCEPT_TIMEOUT_S, f"{victim} ready again")
            ready_s = time.monotonic() - end
    finally:
        direct.close()
        balanced.close()
    assert "other_leads_s" in seen, (
        f"{other} did not take the lead within the partition; its log:\n"
        + _without_requests(compose.logs(other, lines=3000))
        + f"\n{victim}'s log:\n"
        + _without_requests(compose.logs(victim, lines=3000))
    )
    result = {
        "accepted_after_s": round(marker.started + marker.seconds - end, 1),
        "imported_after_s": imported,
        "ready_again_s": round(ready_s, 1),
        **{k: round(v, 1) for k, v in seen.items()},
    }
    result |= check_answers(run.distributor.outcomes, start, end)
    check_health(watch, start, end)
    check_no_restart(compose, before)

    packages = [
        p for p in checks.read_packages(ep.kafka_bootstrap, since=since) if p.agent == AGENT
    ]
    ids = [p.pkg_id for p in packages]
    assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} package ids twice on the log"
    on_log = {
        int(p.metadata[SEQ_KEY]): p.offset
        for p in packages
        if p.metadata.get(RUN_KEY) == run.distributor.run_id and SEQ_KEY in p.metadata
    }
    acknowledged = [o for d in balanced.deliveries for _, o in d.tries if o.status == 200]
    acknowledged.append(marker)
    missing = [o for o in acknowledged if on_log.get(o.seq) != o.offset]
    assert not missing, f"{len(missing)} acknowledged packages not on the log: {missing[:3]}"
    numbers = [p.sequence for p in packages]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers))), (
        f"the agent's numbers are not one by one in log order: {numbers}"
    )
    say(
        run,
        capsys,
        "publisher partition",
        {
            "partitioned": victim,
            "partition_s": round(end - start, 1),
            "logged": len(packages),
            "acknowledged": len(acknowledged),
            "through_the_balancer": _refusals(balanced, start, ep.url_of(victim)),
        }
        | result,
    )


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_crash_of_a_subscriber_during_an_import(
    run: FaultRun, capsys: pytest.CaptureFixture[str]
) -> None:
    compose, victim = run.compose, SUBSCRIBERS[2]
    before = starts(compose)
    with HealthWatch(compose) as watch, load(run.distributor):
        # Alone (the module's first test) the subscriber may not have imported yet.
        wait_for(
            lambda: compose.processed_offset(victim) is not None,
            RECOVERY_TIMEOUT_S,
            f"{victim} to import",
        )

        # Killed while packages are on the log but not yet committed: a second after a burst
        # the import loop has fetched them and runs the Spark job. (The state RUNNING is no
        # sign: it follows the lag of the last announcement, seconds old.) A subscriber that
        # committed the whole burst within that second gets another one.
        killed_at: int | None = None
        for _ in range(CRASH_BURSTS):
            burst = [run.distributor.distribute() for _ in range(BURST)]
            burst.append(run.distributor.distribute("add-deep", spill=True))
            last = max(o.offset for o in burst if o.offset is not None)
            time.sleep(1.0)
            processed = compose.processed_offset(victim)
            if processed is not None and processed < last:
                killed_at = processed
                break
        assert killed_at is not None, f"{victim} imported each of {CRASH_BURSTS} bursts within 1 s"
        compose.kill(victim)
        start = time.monotonic()
        time.sleep(5.0)
        compose.start(victim)
        end = time.monotonic()
        result = recovery(run, end)
    result |= check_answers(run.distributor.outcomes, start, end)
    check_health(watch, start, end, skip=(victim,))
    check_no_restart(compose, before, killed=victim)
    say(
        run,
        capsys,
        "subscriber crash",
        {"subscriber": victim, "killed_at_offset": killed_at, "burst_up_to": last} | result,
    )


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_crash_of_the_publisher(run: FaultRun, capsys: pytest.CaptureFixture[str]) -> None:
    compose = run.compose
    before = starts(compose)
    with HealthWatch(compose, SUBSCRIBERS) as watch, load(run.distributor, threads=3):
        time.sleep(3.0)
        compose.kill(PUBLISHER)
        start = time.monotonic()
        time.sleep(5.0)
        compose.start(PUBLISHER)
        end = time.monotonic()
        result = recovery(run, end)
    result |= check_answers(run.distributor.outcomes, start - 3.0, end)
    check_health(watch, start, end)
    check_no_restart(compose, before, killed=PUBLISHER)
    say(run, capsys, "publisher crash", result)


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_slow_link_to_a_subscriber(run: FaultRun, capsys: pytest.CaptureFixture[str]) -> None:
    compose, victim = run.compose, SUBSCRIBERS[0]
    before = starts(compose)
    with HealthWatch(compose) as watch, load(run.distributor):
        time.sleep(3.0)
        link = compose.slow_link(victim, SLOW_DELAY_MS, SLOW_JITTER_MS, SLOW_LOSS)
        start = time.monotonic()
        try:
            time.sleep(5.0)
            during = recovery(run, time.monotonic())
            time.sleep(max(0.0, start + SLOW_LINK_S - time.monotonic()))
            queued = link.counts()
        finally:
            counts = link.clear()
        # Packets really went through the queue, and some were dropped.
        passed, dropped = (int(part.split("=")[1]) for part in counts.split())
        assert passed > 100, (counts, queued)
        assert dropped > 0, (counts, queued)
        end = time.monotonic()
        result = recovery(run, end)
    result |= check_answers(run.distributor.outcomes, start, end)
    check_health(watch, start, end)
    check_no_restart(compose, before)
    say(
        run,
        capsys,
        "slow link",
        {
            "subscriber": victim,
            "link": f"{SLOW_DELAY_MS} ms +- {SLOW_JITTER_MS} ms, {SLOW_LOSS:.0%} loss",
            "packets_delayed": passed,
            "packets_dropped": dropped,
            "while_slow": during,
        }
        | result,
    )


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_after_the_faults_every_store_is_the_model_of_the_log(
    run: FaultRun, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once, after every fault above (each checked its own recovery): the content and the
    Delta logs of the whole run, every fault's packages included."""
    say(run, capsys, "after the faults", verify(run))
