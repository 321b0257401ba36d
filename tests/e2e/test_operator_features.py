"""Operator features end to end: a publisher daemon with
SCD_PUBLISHER_AGGREGATE_SUBSCRIBER_QUEUES and three Spark subscriber daemons (two editable, one
read-only, staged after the first editable one, all running the invalidation hook shipped as an
entry point of a test distribution) on the real Kafka broker and S3 server, started once for
the module (deploy/cluster.sh through tests/e2e/cluster.py). Each test leaves every subscriber
running, unpaused and caught up.

1. A record no subscriber can import makes each subscriber write a failure event (permanent,
   attempt 1, discarded) to the event topic; the console shows them and the aggregated error
   queues merge the subscribers' error items.
2. With both editable subscribers suspended behind a backlog, `/queues`, `scd queues` and the
   metrics show the two aggregated queues; clearing the editable one sends a ClearCommand to
   each editable subscriber (none to the read-only one), and once resumed every queue drains.
3. A subscriber paused through the REST API shows PAUSED on `/health` and in the queues holding
   it, imports nothing while the others import on, and once resumed (`scd queues resume`)
   imports what it missed exactly once (its Delta log, its post hook calls).
4. The staged subscriber imports a package only after its canary did: while the canary is held
   its queue shows WAITING_FOR_CANARY naming it; the canary's Delta commit of the package
   precedes the staged one's. A package the canary's hook refuses for good is held by the
   staged subscriber (CANARY_FAILED) until the operator resumes it: then it is imported.
5. The invalidation hook reports an INVALIDATE package's paths on every subscriber before the
   package's Delta commit, the post hook after it, and the hooks' metrics count the calls.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from journal import failure_events
from journal.wire import messages as m
from publisher.queues.views import ALL_QUEUE, EDITABLE_QUEUE
from scd.cli import main
from subscriber.hooks.base import ENTRY_POINT_GROUP
from tests import services
from tests.cluster_script import ClusterScript
from tests.e2e import recording_hook
from tests.e2e.cluster import TOKEN, Cluster, Subscriber, SubscriberSpec
from tests.services import KafkaService, S3Service
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EDITABLE_1 = SubscriberSpec(1, editable=True)
EDITABLE_2 = SubscriberSpec(2, editable=True)
READ_ONLY = SubscriberSpec(3, editable=False)
SPECS = [EDITABLE_1, EDITABLE_2, READ_ONLY]
# Spark JVMs start in 10-40 s each, several times that on a loaded machine.
START_TIMEOUT_S = 300.0
CONVERGE_TIMEOUT_S = 300.0
BACKLOG = 4
CANARY, STAGED = EDITABLE_1, READ_ONLY
# The shipped invalidation hook (it logs) and the test's (it reports to the test), in this order.
HOOKS = ("invalidate", recording_hook.ENTRY_POINT)
STATE_TIMEOUT_S = 60.0


def committed_packages(store: Path) -> list[tuple[int, str]]:
    """(commit timestamp in ms, package id) of every package a Delta commit of the store holds,
    read from the commit files of its log (the commit's userMetadata names its packages)."""
    found: list[tuple[int, str]] = []
    for commit in sorted((store / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            info = json.loads(line).get("commitInfo")
            if info and info.get("userMetadata"):
                packages = json.loads(info["userMetadata"]).get("packages", [])
                found.extend((int(info["timestamp"]), pkg_id) for pkg_id in packages)
    return found


class HookRecorder:
    """The HTTP server the recording hook reports to: every report, with whether the package's
    Delta commit was in the store when a post report came in."""

    def __init__(self) -> None:
        self.reports: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                report = json.loads(self.rfile.read(length))
                if report["phase"] == "post":
                    store = Path(str(report["store"]).removeprefix("file:"))
                    held = {p for _, p in committed_packages(store)}
                    report["committed"] = report["pkgId"] in held
                with recorder.lock:
                    recorder.reports.append(report)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                return None  # one line per report would flood the test's output

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def of(self, phase: str, offsets: list[int]) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.reports if r["phase"] == phase and r["offset"] in offsets]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def hook_distribution(directory: Path) -> Path:
    """A directory that, on a daemon's PYTHONPATH, registers the recording hook in the entry
    point group the subscriber loads its hooks from (what an installed package does)."""
    info = directory / "scd_e2e_hooks-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: scd-e2e-hooks\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\n"
        f"{recording_hook.ENTRY_POINT} = {recording_hook.__name__}:recording_hook\n"
    )
    return directory


@pytest.fixture(scope="module")
def recorder() -> Iterator[HookRecorder]:
    recorder = HookRecorder()
    try:
        yield recorder
    finally:
        recorder.close()


@pytest.fixture(scope="module")
def cluster(
    kafka_service: KafkaService,
    s3_service: S3Service,
    tmp_path_factory: pytest.TempPathFactory,
    recorder: HookRecorder,
) -> Iterator[Cluster]:
    name = services.unique_name("e2e-aggregated")
    hooks = hook_distribution(tmp_path_factory.mktemp("e2e-hooks"))
    settings = {
        "SCD_BLOB_CREATE_BUCKET": "true",
        "SCD_PUBLISHER_API_TOKEN": TOKEN,
        "SCD_PUBLISHER_AGENT_NAME": name,
        "SCD_PUBLISHER_INSTANCE_ID": "e2e-publisher",
        "SCD_PUBLISHER_AGGREGATE_SUBSCRIBER_QUEUES": "true",
        "SCD_PUBLISHER_VIEW_REFRESH_S": "0.5",
        "SCD_SUBSCRIBER_ANNOUNCE_INTERVAL_S": "1",
        "SCD_SUBSCRIBER_IMPORT_HOOKS": ",".join(HOOKS),
        f"SCD_CLUSTER_SUBSCRIBER_{STAGED.index}_STAGED_AFTER": CANARY.name,
        recording_hook.URL_VARIABLE: recorder.url,
        "PYTHONPATH": os.pathsep.join([str(hooks), str(services.REPO_ROOT)]),
    }
    for spec in SPECS:
        settings.update(spec.settings())
    script = ClusterScript.configure(
        tmp_path_factory.mktemp("e2e-aggregated"), name, kafka_service, s3_service, 3, settings
    )
    cluster = Cluster(script, name, services.unique_topics(name), kafka_service.bootstrap, SPECS)
    try:
        script.up()

        def all_announced() -> bool:
            subs = cluster.get("/subscribers")
            return len([s for s in subs if s["states"]]) == len(SPECS)

        wait_for(all_announced, START_TIMEOUT_S, "the three subscribers to announce an offset")
        yield cluster
    finally:
        try:
            down = script.down()
            assert down.returncode == 0, down.stdout + down.stderr
        finally:
            cluster.close()


def queues(cluster: Cluster) -> dict[str, dict[str, Any]]:
    return {q["name"]: q for q in cluster.get("/queues")}


def drained(cluster: Cluster, last: int) -> bool:
    found = queues(cluster)
    return set(found) == {EDITABLE_QUEUE, ALL_QUEUE} and all(
        q["size"] == 0 and q["processedOffset"] is not None and q["processedOffset"] >= last
        for q in found.values()
    )


def distribute(cluster: Cluster, path: str) -> int:
    outcome = cluster.distribute(0, {"action": "ADD", "paths": [path], "nodes": [{"path": path}]})
    assert outcome.status == 200, outcome.message
    assert outcome.offset is not None
    return outcome.offset


def test_a_failed_import_is_a_failure_event_of_each_subscriber(cluster: Cluster) -> None:
    before = distribute(cluster, "/ok/before")
    bad = cluster.journal.send(
        cluster.topics["package"], b"\xff\xfe not a package", headers={"type": "PackageMessage"}
    )
    after = distribute(cluster, "/ok/after")

    def events() -> list[failure_events.FailureEvent]:
        found = [
            failure_events.parse(value)
            for _, _, headers, value in cluster._read(cluster.topics["event"])
            if failure_events.is_failure_event(headers)
        ]
        mine = [e for e in found if e.pub_agent_name == cluster.agent_name]
        return mine if len(mine) >= len(SPECS) else []

    found = wait_for(events, CONVERGE_TIMEOUT_S, "a failure event from each subscriber")
    assert sorted(e.sub_agent_name for e in found) == [s.name for s in SPECS]
    assert {(e.offset, e.attempt, e.max_retries, e.will_discard, e.error_class) for e in found} == {
        (bad, 1, -1, True, "permanent")
    }
    assert all(e.exception and "undecodable" in e.message for e in found), found

    # The console's events view shows them (any instance reads them back from the topic).
    def shown() -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = cluster.get("/console/api/events")["failures"]
        return [r for r in rows if r["offset"] == bad]

    rows = wait_for(lambda: len(shown()) == len(SPECS) and shown(), 60, "failure events shown")
    assert {r["errorClass"] for r in rows} == {"permanent"}
    # A permanent failure does not block: every subscriber goes on past it.
    wait_for(lambda: drained(cluster, after), CONVERGE_TIMEOUT_S, "queues drained")
    # The aggregated error queues merge the subscribers' error items.
    every = cluster.get(f"/queues/{ALL_QUEUE}/errors")
    editable = cluster.get(f"/queues/{EDITABLE_QUEUE}/errors")
    assert [i["offset"] for i in every["items"]] == [bad] * len(SPECS)
    assert [i["offset"] for i in editable["items"]] == [bad] * 2
    assert before < bad < after


def test_aggregated_queues_and_a_clear_of_every_editable_subscriber(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    start = cluster.last_package_offset()
    wait_for(lambda: drained(cluster, start), CONVERGE_TIMEOUT_S, "queues drained")
    editable = [cluster.subscribers[s.name] for s in (EDITABLE_1, EDITABLE_2)]
    suspended = []
    try:
        # Suspended, the editable subscribers neither import nor announce: the backlog stays.
        for subscriber in editable:
            os.kill(subscriber.process.pid, signal.SIGSTOP)
            suspended.append(subscriber)
        offsets = [distribute(cluster, f"/backlog/{i}") for i in range(BACKLOG)]
        last = offsets[-1]
        wait_for(
            lambda: queues(cluster)[EDITABLE_QUEUE]["size"] == BACKLOG,
            60,
            f"the editable queue to hold the {BACKLOG} new packages",
        )
        found = queues(cluster)
        assert found[EDITABLE_QUEUE]["editable"] is True
        assert found[ALL_QUEUE]["editable"] is False
        assert found[EDITABLE_QUEUE]["headOffset"] == offsets[0]
        assert found[ALL_QUEUE]["size"] == BACKLOG  # the lowest offset is an editable one's

        # scd queues follows the setting.
        capsys.readouterr()
        code = main(["queues", "--json", "--url", cluster.script.publisher_url])
        assert code == 0
        listed = json.loads(capsys.readouterr().out)
        assert sorted(q["name"] for q in listed) == [ALL_QUEUE, EDITABLE_QUEUE]
        # ... and so do the metrics.
        metrics = cluster.http.get("/metrics").text
        assert f'scd_queue_size{{queue="{EDITABLE_QUEUE}"}} {float(BACKLOG)}' in metrics
        assert "subscriber-1" not in "".join(
            line for line in metrics.splitlines() if line.startswith("scd_queue_size{")
        )

        answer = cluster.http.post(f"/queues/{EDITABLE_QUEUE}/clear", json={"mode": "all"})
        assert answer.status_code == 200, answer.text
        assert (answer.json()["removed"], answer.json()["clearOffset"]) == (BACKLOG, last)
        refused = cluster.http.post(f"/queues/{ALL_QUEUE}/clear", json={"mode": "all"})
        assert refused.status_code == 409

        commands = [
            m.decode(headers, value)
            for _, _, headers, value in cluster._read(cluster.topics["command"])
        ]
        cleared = {
            c.sub_agent_name: c.clear_command.offset
            for c in commands
            if isinstance(c, m.CommandMessage) and c.pub_agent_name == cluster.agent_name
        }
        assert cleared == {EDITABLE_1.name: last, EDITABLE_2.name: last}
    finally:
        for subscriber in suspended:
            os.kill(subscriber.process.pid, signal.SIGCONT)
    wait_for(lambda: drained(cluster, last), CONVERGE_TIMEOUT_S, "queues drained after the clear")
    statuses = [
        m.decode(headers, value) for _, _, headers, value in cluster._read(cluster.topics["status"])
    ]
    removed = {
        (s.sub_agent_name, s.offset)
        for s in statuses
        if isinstance(s, m.PackageStatusMessage)
        and s.status == m.Status.REMOVED
        and s.offset in offsets
    }
    # Whether a resumed subscriber reads the command before it imports the packages is a race
    # of its two readers; what it skipped is reported, the commands above are the clear.
    with capsys.disabled():
        print(
            f"\n[e2e] aggregated clear: {len(removed)} of {2 * BACKLOG} backlog packages "
            "skipped as REMOVED by the editable subscribers",
            file=sys.stderr,
        )


def queue_of(cluster: Cluster, spec: SubscriberSpec) -> str:
    """The subscriber's own queue name (``<instance>-<agent>``), from the publisher."""
    names = [s["queueName"] for s in cluster.get("/subscribers") if s["agentName"] == spec.name]
    assert len(names) == 1, names
    return str(names[0])


def processed(subscriber: Subscriber) -> int:
    """Its processed offset, -1 before it processed any."""
    offset = subscriber.processed_offset()
    return -1 if offset is None else offset


def state(subscriber: Subscriber) -> str | None:
    health = subscriber.health()
    return None if health is None else str(health["state"])


def package_ids(cluster: Cluster, offsets: list[int]) -> list[str]:
    # Decoded one by one: the package topic holds the first test's undecodable record. Read
    # until all are there: a committed transaction's records reach committed-only readers once
    # its marker is written, milliseconds after the commit answered.
    def read() -> dict[int, Any] | None:
        by_offset = {
            offset: m.decode(headers, value)
            for _, offset, headers, value in cluster._read(cluster.topics["package"])
            if offset in offsets
        }
        return by_offset if set(by_offset) == set(offsets) else None

    by_offset = wait_for(read, 30, f"packages at offsets {offsets} readable")
    found = [by_offset[o] for o in offsets]
    assert all(isinstance(p, m.PackageMessage) for p in found), found
    return [p.pkg_id for p in found if isinstance(p, m.PackageMessage)]


def held_states(cluster: Cluster) -> set[str]:
    return {q["state"] for q in queues(cluster).values()}


def test_a_paused_subscriber_imports_nothing_until_resumed(
    cluster: Cluster, recorder: HookRecorder, capsys: pytest.CaptureFixture[str]
) -> None:
    start = cluster.last_package_offset()
    wait_for(lambda: drained(cluster, start), CONVERGE_TIMEOUT_S, "queues drained")
    paused = cluster.subscribers[EDITABLE_2.name]
    others = [cluster.subscribers[s.name] for s in (EDITABLE_1, READ_ONLY)]
    queue = queue_of(cluster, EDITABLE_2)
    before = processed(paused)

    answer = cluster.http.post(f"/queues/{queue}/pause")
    resumed = False
    try:
        assert answer.status_code == 200, answer.text
        assert answer.json()["paused"] is True
        wait_for(lambda: state(paused) == "PAUSED", STATE_TIMEOUT_S, "/health to say PAUSED")
        # Aggregated, the queues holding it show it: the editable one and the one of all.
        wait_for(
            lambda: {q["state"] for q in queues(cluster).values()} == {"PAUSED"},
            STATE_TIMEOUT_S,
            "both aggregated queues to show PAUSED",
        )
        refused = cluster.http.post(f"/queues/{EDITABLE_QUEUE}/pause")
        assert refused.status_code == 400, refused.text

        offsets = [distribute(cluster, f"/paused/{i}") for i in range(2)]
        ids = package_ids(cluster, offsets)
        wait_for(
            lambda: all(processed(s) >= offsets[-1] for s in others),
            CONVERGE_TIMEOUT_S,
            "the other subscribers to import the packages",
        )
        # Both imported and reported after the paused one acted on the command: it holds.
        assert processed(paused) == before
        assert state(paused) == "PAUSED"
        assert not {p for _, p in committed_packages(paused.store)} & set(ids)
        wait_for(
            lambda: (
                {r["subscriber"] for r in recorder.of("post", offsets)}
                == {s.spec.name for s in others}
            ),
            STATE_TIMEOUT_S,
            "the other subscribers' post hooks",
        )
        assert len(recorder.of("post", offsets)) == 2 * len(others)

        capsys.readouterr()
        code = main(
            ["queues", "resume", queue, "--url", cluster.script.publisher_url, "--token", TOKEN]
        )
        assert code == 0, capsys.readouterr()
        resumed = True
    finally:
        if not resumed:  # leave the cluster as the next test expects it
            cluster.http.post(f"/queues/{queue}/resume")

    wait_for(lambda: drained(cluster, offsets[-1]), CONVERGE_TIMEOUT_S, "queues drained")
    wait_for(lambda: "PAUSED" not in held_states(cluster), STATE_TIMEOUT_S, "PAUSED to go")
    assert state(paused) != "PAUSED"
    # What it missed, it imported once: one Delta commit entry and one post hook call each.
    commits = Counter(p for _, p in committed_packages(paused.store))
    assert [commits[i] for i in ids] == [1, 1]
    posts = Counter(
        r["offset"] for r in recorder.of("post", offsets) if r["subscriber"] == paused.spec.name
    )
    assert posts == {offsets[0]: 1, offsets[1]: 1}


def test_the_staged_subscriber_imports_after_its_canary(cluster: Cluster) -> None:
    start = cluster.last_package_offset()
    wait_for(lambda: drained(cluster, start), CONVERGE_TIMEOUT_S, "queues drained")
    canary, staged = cluster.subscribers[CANARY.name], cluster.subscribers[STAGED.name]
    other = cluster.subscribers[EDITABLE_2.name]
    # Suspended, the canary neither imports nor reports: the staged subscriber waits for it.
    os.kill(canary.process.pid, signal.SIGSTOP)
    try:
        offset = distribute(cluster, "/staged/page")
        (pkg_id,) = package_ids(cluster, [offset])
        wait_for(
            lambda: processed(other) >= offset,
            CONVERGE_TIMEOUT_S,
            "the subscriber that is not staged to import the package",
        )
        health = wait_for(
            lambda: (h := staged.health()) is not None and h["state"] == "WAITING_FOR_CANARY" and h,
            STATE_TIMEOUT_S,
            "the staged subscriber to wait for its canary",
        )
        assert health["canaryWait"] == {"offset": offset, "pending": [CANARY.name], "failed": []}
        # The read-only staged subscriber is only in the queue of all subscribers.
        wait_for(
            lambda: queues(cluster)[ALL_QUEUE]["state"] == "WAITING_FOR_CANARY",
            STATE_TIMEOUT_S,
            "the publisher to show the wait",
        )
        assert processed(staged) < offset
        assert pkg_id not in {p for _, p in committed_packages(staged.store)}
    finally:
        os.kill(canary.process.pid, signal.SIGCONT)
    wait_for(lambda: drained(cluster, offset), CONVERGE_TIMEOUT_S, "queues drained")
    assert "WAITING_FOR_CANARY" not in held_states(cluster)
    canary_at = [t for t, p in committed_packages(canary.store) if p == pkg_id]
    staged_at = [t for t, p in committed_packages(staged.store) if p == pkg_id]
    assert len(canary_at) == len(staged_at) == 1
    assert canary_at[0] < staged_at[0]


def hook_failures(subscriber: Subscriber) -> float:
    """The subscriber's permanent failures of the recording hook's pre phase (its /metrics)."""
    text = httpx.get(f"{subscriber.url}/metrics", timeout=10.0).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "scd_import_hook_failures_total"
        and sample.labels["hook"] == recording_hook.ENTRY_POINT
        and (sample.labels["phase"], sample.labels["error_class"]) == ("pre", "permanent")
    )


def test_a_package_that_failed_the_canary_is_held_until_resumed(cluster: Cluster) -> None:
    start = cluster.last_package_offset()
    wait_for(lambda: drained(cluster, start), CONVERGE_TIMEOUT_S, "queues drained")
    canary, staged = cluster.subscribers[CANARY.name], cluster.subscribers[STAGED.name]
    other = cluster.subscribers[EDITABLE_2.name]
    failures = hook_failures(canary)
    # The canary's hook refuses this package for good: it gives it up (REMOVED_FAILED).
    offset = distribute(cluster, recording_hook.REFUSED_BY + CANARY.name)
    (pkg_id,) = package_ids(cluster, [offset])
    wait_for(lambda: processed(other) >= offset, CONVERGE_TIMEOUT_S, "the others to import it")
    health = wait_for(
        lambda: (h := staged.health()) is not None and h["state"] == "CANARY_FAILED" and h,
        CONVERGE_TIMEOUT_S,
        "the staged subscriber to hold the package the canary failed",
    )
    assert health["canaryWait"] == {"offset": offset, "pending": [], "failed": [CANARY.name]}
    wait_for(
        lambda: queues(cluster)[ALL_QUEUE]["state"] == "CANARY_FAILED",
        STATE_TIMEOUT_S,
        "the publisher to show the hold",
    )
    assert processed(canary) >= offset  # it went on past the package it gave up
    assert pkg_id not in {p for _, p in committed_packages(canary.store)}
    assert hook_failures(canary) == failures + 1
    assert processed(staged) < offset

    # The operator's resume releases the package: the staged subscriber imports it anyway.
    answer = cluster.http.post(f"/queues/{queue_of(cluster, STAGED)}/resume")
    assert answer.status_code == 200, answer.text
    wait_for(lambda: drained(cluster, offset), CONVERGE_TIMEOUT_S, "queues drained")
    assert "CANARY_FAILED" not in held_states(cluster)
    assert [p for _, p in committed_packages(staged.store)].count(pkg_id) == 1


def hook_calls(subscriber: Subscriber) -> dict[tuple[str, str, str], float]:
    """(kind, hook, phase) -> count of the subscriber's hook counters on its /metrics."""
    text = httpx.get(f"{subscriber.url}/metrics", timeout=10.0).text
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in ("scd_import_hook_requests_total", "scd_import_hook_successes_total"):
                key = (sample.name, sample.labels["hook"], sample.labels["phase"])
                found[key] = sample.value
    return found


def test_import_hooks_run_around_the_delta_commit(cluster: Cluster, recorder: HookRecorder) -> None:
    start = cluster.last_package_offset()
    wait_for(lambda: drained(cluster, start), CONVERGE_TIMEOUT_S, "queues drained")
    subscribers = list(cluster.subscribers.values())
    before = {s.spec.name: hook_calls(s) for s in subscribers}
    paths = ["/invalidated/a", "/invalidated/b"]
    outcome = cluster.distribute(0, {"action": "INVALIDATE", "paths": paths})
    offset = outcome.offset
    assert outcome.status == 200, outcome.message
    assert offset is not None
    names = sorted(s.spec.name for s in subscribers)

    posts = wait_for(
        lambda: (
            (found := recorder.of("post", [offset]))
            and sorted(r["subscriber"] for r in found) == names
            and found
        ),
        CONVERGE_TIMEOUT_S,
        "every subscriber's post hook",
    )
    invalidations = recorder.of("invalidate", [offset])
    assert sorted(r["subscriber"] for r in invalidations) == names
    assert all(r["invalidated"] == paths and r["action"] == "INVALIDATE" for r in invalidations)
    # The post hook ran once the store held the package's commit.
    assert all(r["committed"] for r in posts), posts
    with recorder.lock:
        order = [(r["subscriber"], r["phase"]) for r in recorder.reports if r["offset"] == offset]
    for name in names:
        assert [p for s, p in order if s == name] == ["invalidate", "post"]

    keys = [
        (kind, hook, phase)
        for kind in ("scd_import_hook_requests_total", "scd_import_hook_successes_total")
        for hook in HOOKS
        for phase in ("pre", "post")
    ]

    def gained() -> dict[str, list[float]]:
        now = {s.spec.name: hook_calls(s) for s in subscribers}
        return {
            name: [now[name].get(k, 0.0) - before[name].get(k, 0.0) for k in keys] for name in names
        }

    # The post hook's call is counted once it returned, after its report came in.
    wait_for(
        lambda: all(v == [1.0] * len(keys) for v in gained().values()),
        STATE_TIMEOUT_S,
        f"each subscriber to count one call of each hook ({keys})",
    )
    for s in subscribers:
        log = s.process.log_path.read_text(errors="replace")
        assert f"invalidate 2 paths of {posts[0]['pkgId']} at offset {offset}" in log
