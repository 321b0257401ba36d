"""A publisher and subscriber agents on one journal taking hostile records on every topic, and
the checks that a valid package distributed after the garbage still reaches every store.

Everything runs in this process with its real threads: the publisher agent behind its HTTP API
(uvicorn), each subscriber agent with the health endpoint the subscriber daemon serves. The
subscribers' stores are Delta tables (Spark) or the in-memory store of the subscriber tests
(the same import logic, no Spark). One subscriber is editable (it reads the command topic),
one is not; both keep Sling's default max_retries -1, under which a failure wrongly taken for
a transient one blocks the subscriber for good.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)
from pydantic import SecretStr

from blobstore.factory import open_blob_store
from journal.api import Journal, Position
from journal.factory import open_journal
from journal.topics import topic_specs
from journal.wire import messages as m
from publisher.agent import PublisherAgent
from publisher.api import create_app
from publisher.client import PublisherClient
from runtime.errors import DecodeError
from runtime.http_server import AppServer
from subscriber.agent import SubscriberAgent
from subscriber.http import HealthServer
from tests.fuzz import records as r
from tests.fuzz.liveness import (
    ThreadWatch,
    distribute_after_garbage,
    increased,
    restart_counts,
)
from tests.publisher.conftest import TOKEN, publisher_settings
from tests.services import KafkaService
from tests.subscriber import harness as h
from tests.waiting import wait_for

# Answers of either HTTP server come within this bound, or the request counts as hung.
HTTP_TIMEOUT_S = 10.0
# The subscribers: one editable (reads commands), one not; Sling's max_retries -1 for both.
SUBSCRIBERS = {"fuzz-editable": {"editable": True}, "fuzz-plain": {"editable": False}}
# The publisher's signing key id, when records are signed.
KEY_ID = "fuzz-key"


def _key_pair() -> tuple[str, str]:
    """An Ed25519 key pair as the settings take them: ``base64:`` and the raw key."""
    private = Ed25519PrivateKey.generate()
    raw_private = private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    raw_public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return (
        "base64:" + base64.b64encode(raw_private).decode(),
        "base64:" + base64.b64encode(raw_public).decode(),
    )


def _instance_id(agent: SubscriberAgent) -> str:
    return agent.instance_id


@dataclass
class Subscriber:
    agent: SubscriberAgent
    server: HealthServer

    def get(self, path: str) -> httpx.Response:
        return httpx.get(f"{self.server.url}{path}", timeout=HTTP_TIMEOUT_S)


@dataclass
class SubscribersUnderFire:
    """Build with ``start``; ``close`` stops everything."""

    journal: Journal
    env: h.Env
    agent_name: str
    publisher: PublisherAgent
    publisher_server: AppServer
    subscribers: list[Subscriber]
    watch: ThreadWatch
    kafka: KafkaService | None
    names: dict[str, str]
    partitions: dict[str, int]
    api: PublisherClient = field(init=False)
    http: httpx.Client = field(init=False)
    restarts_before: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.api = PublisherClient(self.publisher_server.url, TOKEN, timeout_s=HTTP_TIMEOUT_S)
        self.http = self.api.http

    @classmethod
    def start(
        cls,
        tmp: Path,
        prefix: str,
        kafka: KafkaService | None,
        make_store: Callable[[str], Any],
        *,
        signed: bool = False,
    ) -> SubscribersUnderFire:
        """``make_store(path)``: the store of a subscriber (a DeltaStore or a MemoryStore);
        ``signed``: the publisher signs its records and the subscribers verify them."""
        js = h.journal_settings(kafka, prefix, tmp)
        bs = h.blob_settings(None, prefix, tmp)
        journal = open_journal(js)
        journal.create_topics(topic_specs(js))
        blobs = open_blob_store(bs)
        env = h.Env(journal, js, blobs, bs, tmp)
        agent_name = h.PUB if kafka is None else f"fuzz-{prefix}"
        watch = ThreadWatch()
        private_key, public_key = _key_pair() if signed else ("", "")
        signing: dict[str, Any] = (
            {"signing_key": SecretStr(private_key), "signing_key_id": KEY_ID} if signed else {}
        )
        verify: dict[str, Any] = {"verify_keys": {KEY_ID: public_key}} if signed else {}
        settings = publisher_settings(
            agent_name=agent_name, leader_topic=f"{prefix}.leader", **signing
        )
        publisher = PublisherAgent(settings, js, journal, blobs).start()
        server = AppServer(create_app(publisher), name="publisher under fire")
        server.start()
        subscribers = []
        for name, overrides in SUBSCRIBERS.items():
            sub_settings = h.subscriber_settings(
                js,
                bs,
                tmp / name,
                agent_name=name,
                pub_agents=[agent_name],
                **overrides,
                **verify,
            )
            agent = SubscriberAgent(
                sub_settings, journal, make_store(sub_settings.store_path), blobs
            ).start()
            health = HealthServer(agent.health, agent.ready, agent.metrics.render)
            health.start()
            subscribers.append(Subscriber(agent, health))
        for sub in subscribers:
            wait_for(partial(_instance_id, sub.agent), 300, f"{sub.agent.name} to open")
        watch.started()
        names = r.topic_names(js.topics)
        counts = {spec.name: spec.partitions for spec in topic_specs(js)}
        partitions = {kind: counts[name] for kind, name in names.items()}
        return cls(
            journal,
            env,
            agent_name,
            publisher,
            server,
            subscribers,
            watch,
            kafka,
            names,
            partitions,
        )

    def close(self) -> None:
        self.http.close()
        for sub in self.subscribers:
            sub.server.stop()
            sub.agent.stop()
        self.publisher_server.stop()
        self.publisher.stop()
        self.env.blobs.close()
        self.journal.close()

    @property
    def targets(self) -> list[tuple[str, str]]:
        """The subscribers as commands address them: (instance id, agent name)."""
        return [(s.agent.instance_id, s.agent.name) for s in self.subscribers]

    # ------------------------------------------------------------------ firing
    def write(self, batch: Sequence[r.Garbage]) -> None:
        if self.kafka is None:
            r.send_records(self.journal, self.names, batch)
        else:
            r.produce_raw(self.kafka.bootstrap, self.names, batch, self.partitions)

    def restart_counts(self) -> dict[str, float]:
        counts = restart_counts(self.http.get("/metrics").text)
        for sub in self.subscribers:
            for key, value in restart_counts(sub.get("/metrics").text).items():
                counts[f"{sub.agent.name}:{key}"] = value
        return counts

    def distribute(self, path: str) -> int:
        return distribute_after_garbage(self.api, path)

    def wait_imported(self, offset: int, path: str, timeout_s: float) -> None:
        """Every subscriber imports the package at ``offset`` (its node is in the store)."""
        node = f"{path}/ok"
        deadline = time.monotonic() + timeout_s
        pending = list(self.subscribers)
        while pending:
            pending = [
                s
                for s in pending
                if s.agent.processed_offset < offset or s.agent.store.node(node) is None
            ]
            if pending and time.monotonic() > deadline:
                raise AssertionError(
                    f"the package at {offset} was not imported within {timeout_s:.0f} s by "
                    + "; ".join(self.describe(s, node) for s in pending)
                    + f"; {self.diagnosis()}"
                )
            time.sleep(0.05)

    def describe(self, sub: Subscriber, node: str) -> str:
        agent = sub.agent
        return (
            f"{agent.name} (health {agent.health().model_dump()}, retries {agent.retries}, "
            f"counters {agent.counters}, store {agent.store.state}, has {node}: "
            f"{agent.store.node(node) is not None}, last error it reported: "
            f"{self.last_error(agent.name)})"
        )

    def last_error(self, agent_name: str) -> str | None:
        """The last LogMessage the subscriber sent (offset and text), from the status topic."""
        last: m.LogMessage | None = None
        topic = self.names["status"]
        end = self.journal.latest_offset(topic)
        with self.journal.consumer(topic, Position.earliest()) as consumer:
            deadline = time.monotonic() + 30
            while consumer.positions().get(0, 0) < end and time.monotonic() < deadline:
                for record in consumer.poll(0.2):
                    try:
                        message = m.decode(record.headers, record.value)
                    except DecodeError:
                        continue  # garbage of ours
                    if isinstance(message, m.LogMessage) and message.sub_agent_name == agent_name:
                        last = message
        return None if last is None else f"offset {last.offset}: {last.message[:300]}"

    def diagnosis(self) -> str:
        return (
            f"threads died: {self.watch.dead()}; loops restarted: "
            f"{increased(self.restarts_before, self.restart_counts())}"
        )

    def check_alive(self, what: str) -> None:
        """Threads alive, no loop restarted, the endpoints answer; each subscriber ready."""
        dead = self.watch.dead()
        assert not dead, f"after {what}: threads died: {dead}"
        restarted = increased(self.restarts_before, self.restart_counts())
        assert not restarted, f"after {what}: loops restarted: {restarted}"
        for path in ("/ready", "/queues", "/subscribers", "/agent"):
            answer = self.http.get(path)
            assert answer.status_code == 200, f"after {what}: publisher {path}: {answer.text}"
        for sub in self.subscribers:
            health = sub.get("/health")
            assert health.status_code == 200, f"after {what}: {sub.agent.name} /health"
            ready = sub.get("/ready")
            assert ready.status_code == 200, (
                f"after {what}: {sub.agent.name} /ready {ready.status_code} {ready.text}"
            )
