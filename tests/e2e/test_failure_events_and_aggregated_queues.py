"""Failure events and aggregated queues end to end: a publisher daemon with
SCD_PUBLISHER_AGGREGATE_SUBSCRIBER_QUEUES and three Spark subscriber daemons (two editable, one
read-only) on the real Kafka broker and S3 server, started once for the module
(deploy/cluster.sh through tests/e2e/cluster.py).

1. A record no subscriber can import makes each subscriber write a failure event (permanent,
   attempt 1, discarded) to the event topic; the console shows them and the aggregated error
   queues merge the subscribers' error items.
2. With both editable subscribers suspended behind a backlog, `/queues`, `scd queues` and the
   metrics show the two aggregated queues; clearing the editable one sends a ClearCommand to
   each editable subscriber (none to the read-only one), and once resumed every queue drains.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from journal import failure_events
from journal.wire import messages as m
from publisher.queues.views import ALL_QUEUE, EDITABLE_QUEUE
from scd.cli import main
from tests import services
from tests.cluster_script import ClusterScript
from tests.e2e.cluster import TOKEN, Cluster, SubscriberSpec
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


@pytest.fixture(scope="module")
def cluster(
    kafka_service: KafkaService, s3_service: S3Service, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    name = services.unique_name("e2e-aggregated")
    settings = {
        "SCD_BLOB_CREATE_BUCKET": "true",
        "SCD_PUBLISHER_API_TOKEN": TOKEN,
        "SCD_PUBLISHER_AGENT_NAME": name,
        "SCD_PUBLISHER_INSTANCE_ID": "e2e-publisher",
        "SCD_PUBLISHER_AGGREGATE_SUBSCRIBER_QUEUES": "true",
        "SCD_PUBLISHER_VIEW_REFRESH_S": "0.5",
        "SCD_SUBSCRIBER_ANNOUNCE_INTERVAL_S": "1",
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
    start = cluster.latest_offset() - 1
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
