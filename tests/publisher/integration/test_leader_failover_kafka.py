"""Leader failover with two publisher processes on the real broker: the leader is killed
(SIGKILL) and the distributed events keep flowing from the other, with no duplicate and no
gap; and both take distribute requests, through a pause and a kill, losing none."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient

from journal.api import Position
from journal.kafka.journal import KafkaJournal
from journal.settings import JournalSettings
from journal.wire.messages import PackageMessage, decode
from publisher.client import PublisherClient
from publisher.distributed_events import distributed_event
from publisher.leader import leader_group_id
from tests.publisher.conftest import TOKEN
from tests.publisher.simulate import SimulatedSubscriber
from tests.services import REPO_ROOT, KafkaService, free_port, unique_topics
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# Leader jobs and the view run every 200 ms so events follow announcements quickly.
REFRESH_S = "0.2"
# Kafka evicts a killed member after the 6 s session timeout; rebalance and a read-back
# follow. 60 s is ample on a loaded machine.
TAKEOVER_TIMEOUT_S = 60
# How long the test's balancer leaves out an instance that did not answer.
BALANCER_HOLD_S = 10.0


class Publisher:
    def __init__(self, env: dict[str, str], instance: str, log_dir: Path) -> None:
        self.port = free_port()
        self.instance = instance
        self.log = (log_dir / f"{instance}.log").open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "scd", "publisher"],
            env={
                **env,
                "SCD_PUBLISHER_INSTANCE_ID": instance,
                "SCD_PUBLISHER_PORT": str(self.port),
            },
            cwd=REPO_ROOT,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.api = PublisherClient(f"http://127.0.0.1:{self.port}", TOKEN, timeout_s=30)

    def get(self, path: str) -> Any:
        return self.api.http.get(path).json()

    def ready(self) -> bool:
        return self.api.ready()

    def distribute(self, path: str) -> int:
        return int(self.api.distribute({"action": "DELETE", "paths": [path]})["offset"])

    def stop(self) -> None:
        self.api.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


@pytest.fixture
def environment(kafka_service: KafkaService, unique_name: str, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCD_")}
    env.update(
        {
            "SCD_JOURNAL_BACKEND": "kafka",
            "SCD_JOURNAL_BOOTSTRAP_SERVERS": kafka_service.bootstrap,
            "SCD_JOURNAL_SEND_TIMEOUT_S": "10",
            **{
                f"SCD_JOURNAL_TOPICS__{kind.upper()}": topic
                for kind, topic in unique_topics(unique_name).items()
            },
            "SCD_BLOB_BACKEND": "local",
            "SCD_BLOB_LOCAL_ROOT": str(tmp_path / "blobs"),
            "SCD_PUBLISHER_API_TOKEN": TOKEN,
            "SCD_PUBLISHER_AGENT_NAME": unique_name,
            "SCD_PUBLISHER_LEADER_TOPIC": f"{unique_name}.leader",
            "SCD_PUBLISHER_VIEW_REFRESH_S": REFRESH_S,
            "SCD_PUBLISHER_DISCOVERY_TTL_S": "300",
        }
    )
    return env


@pytest.fixture
def publishers(environment: dict[str, str], tmp_path: Path) -> Iterator[list[Publisher]]:
    started = [Publisher(environment, name, tmp_path) for name in ("pub-a", "pub-b")]
    try:
        for p in started:
            wait_for(p.ready, 90, f"{p.instance} ready (log: {p.log.name})")
        yield started
    finally:
        for p in started:
            p.stop()


def events(journal: KafkaJournal, topic: str) -> list[dict[str, Any]]:
    out: list[tuple[int, int, dict[str, Any]]] = []
    with journal.consumer(topic, Position.earliest()) as consumer:
        while batch := consumer.poll(1.0):
            for r in batch:
                if (event := distributed_event(r.headers, r.value)) is not None:
                    out.append((r.partition, r.offset, event))
    return [e for _, _, e in sorted(out, key=lambda t: (t[0], t[1]))]


def test_killing_the_leader_moves_events_to_the_other_without_duplicates_or_gaps(
    publishers: list[Publisher], kafka_service: KafkaService, unique_name: str
) -> None:
    settings = JournalSettings(backend="kafka", bootstrap_servers=kafka_service.bootstrap)
    journal = KafkaJournal(settings.bootstrap_servers)
    topics = settings.topics.model_copy(update=unique_topics(unique_name))
    sub = SimulatedSubscriber(journal, topics, "sub-1", pub_agent_name=unique_name)

    def leader() -> Publisher | None:
        leaders = [p for p in publishers if p.process.poll() is None and p.get("/agent")["leader"]]
        return leaders[0] if len(leaders) == 1 else None

    # Both publishers must be members before the leader is picked: a publisher that joins the
    # group later triggers a rebalance, which may move leadership (correctly) mid-test.
    admin = AdminClient({"bootstrap.servers": kafka_service.bootstrap})
    group = leader_group_id(unique_name)

    def both_members() -> bool:
        found = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
        return found.state == ConsumerGroupState.STABLE and len(found.members) == len(publishers)

    wait_for(both_members, TAKEOVER_TIMEOUT_S, "both publishers in the leader group")
    first_leader: Publisher = wait_for(leader, TAKEOVER_TIMEOUT_S, "one leader")
    follower = next(p for p in publishers if p is not first_leader)

    offsets = [follower.distribute(f"/p{i}") for i in range(3)]
    sub.announce(offsets[0])
    wait_for(lambda: first_leader.get("/agent")["lastEventOffset"] == offsets[0], 30, "start")

    def advance(count: int, via: Publisher) -> None:
        for _ in range(count):
            offsets.append(via.distribute(f"/p{len(offsets)}"))
            sub.announce(offsets[-1])

    advance(10, follower)
    wait_for(lambda: len(events(journal, topics.event)) >= 5, 30, "events from the first leader")
    first_leader.process.kill()  # SIGKILL: no goodbye to the group, in the middle of events
    first_leader.process.wait()
    advance(10, follower)

    expected = offsets[1:]
    wait_for(
        lambda: [e["offset"] for e in events(journal, topics.event)][-1:] == expected[-1:],
        TAKEOVER_TIMEOUT_S,
        "events from the new leader",
    )
    found = events(journal, topics.event)
    assert [e["offset"] for e in found] == expected  # in order, once each, none missing
    assert {e["application"] for e in found} == {"pub-a", "pub-b"}
    assert follower.get("/agent")["leader"] is True
    journal.close()


class Balancer:
    """Clients behind a round-robin balancer over the publishers: each request goes to the
    next instance; one that did not answer is left out for a while (a balancer's passive
    health check), and the request tried again (a client's retry). Only a 200 counts as
    acknowledged."""

    def __init__(self, publishers: list[Publisher]) -> None:
        self.publishers = publishers
        self.turn = itertools.count()
        self.down_until = dict.fromkeys(range(len(publishers)), 0.0)
        self.acknowledged: dict[str, float] = {}  # package id -> when it was acknowledged
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def pick(self) -> int:
        with self.lock:
            for _ in range(len(self.publishers)):
                index = next(self.turn) % len(self.publishers)
                if self.down_until[index] <= time.monotonic():
                    return index
            return next(self.turn) % len(self.publishers)

    def client(self, number: int) -> None:
        with PublisherClient(token=TOKEN, timeout_s=5).http as http:
            for i in itertools.count():
                if self.stop.is_set():
                    return
                index = self.pick()
                path = f"/c{number}/p{i}"
                try:
                    response = http.post(
                        f"http://127.0.0.1:{self.publishers[index].port}/distribute",
                        json={"action": "DELETE", "paths": [path]},
                    )
                except httpx.HTTPError:
                    with self.lock:
                        self.down_until[index] = time.monotonic() + BALANCER_HOLD_S
                    continue
                if response.status_code == 200:
                    with self.lock:
                        self.acknowledged[response.json()["packageId"]] = time.monotonic()
                else:
                    assert response.status_code == 503, response.text

    def count(self) -> int:
        with self.lock:
            return len(self.acknowledged)

    def wait_for_more(self, count: int, what: str) -> None:
        target = self.count() + count
        wait_for(lambda: self.count() >= target, TAKEOVER_TIMEOUT_S, what)


def logged_packages(journal: KafkaJournal, topic: str, agent: str) -> list[PackageMessage]:
    found: list[PackageMessage] = []
    with journal.consumer(topic, Position.earliest()) as consumer:
        while batch := consumer.poll(1.0, max_records=10_000):
            decoded = (decode(r.headers, r.value) for r in batch)
            found.extend(m for m in decoded if isinstance(m, PackageMessage))
    return [m for m in found if m.pub_agent_name == agent]


def test_two_replicas_lose_no_acknowledged_package_when_one_pauses_or_dies(
    publishers: list[Publisher], kafka_service: KafkaService, unique_name: str
) -> None:
    """Four clients round-robin over both instances; the leader is paused (SIGSTOP) past its
    session timeout and resumed, then the leader is killed (SIGKILL). Every acknowledged
    package is on the log once, and the agent's numbers run one by one in log order: a
    subscriber admits every record, none as a replay."""
    settings = JournalSettings(backend="kafka", bootstrap_servers=kafka_service.bootstrap)
    journal = KafkaJournal(settings.bootstrap_servers)
    topics = settings.topics.model_copy(update=unique_topics(unique_name))

    def leader() -> Publisher | None:
        alive = [p for p in publishers if p.process.poll() is None]
        leaders = [p for p in alive if p.ready() and p.get("/agent")["leader"]]
        return leaders[0] if len(leaders) == 1 else None

    first: Publisher = wait_for(leader, TAKEOVER_TIMEOUT_S, "one leader")
    balancer = Balancer(publishers)
    clients = [threading.Thread(target=balancer.client, args=(n,)) for n in range(4)]
    for c in clients:
        c.start()
    try:
        balancer.wait_for_more(40, "packages through both instances")
        first.process.send_signal(signal.SIGSTOP)  # frozen in the middle of the stream
        paused_at = time.monotonic()
        balancer.wait_for_more(20, "packages while the leader is frozen")
        resumed_at = time.monotonic()
        first.process.send_signal(signal.SIGCONT)
        balancer.wait_for_more(40, "packages after the frozen leader woke up")
        second: Publisher = wait_for(leader, TAKEOVER_TIMEOUT_S, "one leader after the pause")
        second.process.kill()  # SIGKILL: in the middle of the stream
        killed_at = time.monotonic()
        second.process.wait()
        balancer.wait_for_more(40, "packages after the leader was killed")
    finally:
        balancer.stop.set()
        for c in clients:
            c.join(60)
    logged = logged_packages(journal, topics.package, unique_name)
    ids = [m.pkg_id for m in logged]
    assert len(ids) == len(set(ids)), "a package is on the log twice"
    missing = set(balancer.acknowledged) - set(ids)
    assert not missing, f"{len(missing)} acknowledged packages are not on the log"
    numbers = [m.sequence for m in logged]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers))), "replay or gap"

    def stalled_s(since: float) -> float:
        """How long no request was acknowledged after ``since``."""
        return min(t for t in balancer.acknowledged.values() if t >= since) - since

    print(
        json.dumps(
            {
                "acknowledged": len(balancer.acknowledged),
                "logged": len(logged),
                "stalled_after_pause_s": round(stalled_s(paused_at), 2),
                "frozen_s": round(resumed_at - paused_at, 2),
                "stalled_after_kill_s": round(stalled_s(killed_at), 2),
            }
        )
    )
    journal.close()
