"""scd embedded in the test process, as the operator tools see it: a publisher with its REST API
and console, and subscribers each with its health and metrics endpoint, on the SQLite journal,
a local blob store and the test run's one SparkSession (one JVM for every subscriber).

Subscribers start and stop independently, so a test can leave packages waiting for a stopped
one. Records a faulty writer or a failing subscriber would send are written straight to the
journal (the publisher knows subscribers only through it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from blobstore.factory import open_blob_store
from blobstore.settings import BlobStoreSettings
from journal.content.package import PACKAGE_TYPE
from journal.factory import open_journal
from journal.messaging import MessageSender
from journal.settings import JournalSettings
from journal.topics import topic_specs
from journal.wire import messages as m
from publisher.agent import PublisherAgent
from publisher.api import create_app
from publisher.client import PublisherClient
from publisher.queues.views import QueueSummary
from publisher.settings import PublisherSettings
from runtime.http_server import AppServer
from subscriber.agent import SubscriberAgent
from subscriber.http import HealthServer
from subscriber.settings import SubscriberSettings
from subscriber.store.delta import DeltaStore

TOKEN = "operator-test-token-0123456789"
PUB_AGENT = "publish"
# The view, leader jobs and announcements run every half second: the console polls every
# second and the tests wait for what it shows.
REFRESH_S = 0.5
SITE = {
    "docs/index.html": "<h1>docs</h1>",
    "docs/guide.html": "<p>guide</p>",
    "news/today.html": "<p>news</p>",
}


@dataclass
class Sub:
    agent: SubscriberAgent
    server: HealthServer

    @property
    def metrics_url(self) -> str:
        return f"{self.server.url}/metrics"


class Embedded:
    def __init__(self, workdir: Path, spark: Any) -> None:
        self.workdir = workdir
        self.spark = spark
        self.js = JournalSettings(backend="sqlite", sqlite_path=workdir / "journal.db")
        self.bs = BlobStoreSettings(backend="local", local_root=workdir / "blobs")
        self.journal = open_journal(self.js)
        self.blobs = open_blob_store(self.bs)
        self.journal.create_topics(topic_specs(self.js))
        site = workdir / "site"
        for name, text in SITE.items():
            (site / name).parent.mkdir(parents=True, exist_ok=True)
            (site / name).write_text(text)
        settings = PublisherSettings(
            api_token=SecretStr(TOKEN),
            agent_name=PUB_AGENT,
            instance_id="operator-test-publisher",
            content_root=site,
            view_refresh_s=REFRESH_S,
            leader_lock_retry_s=REFRESH_S,
        )
        self.publisher = PublisherAgent(settings, self.js, self.journal, self.blobs).start()
        self.api = AppServer(create_app(self.publisher), name="publisher API")
        self.api.start()
        self.client = PublisherClient(self.api.url, TOKEN, timeout_s=60)
        self.subscribers: dict[str, Sub] = {}

    @property
    def url(self) -> str:
        return self.api.url

    # ------------------------------------------------------------------ subscribers
    def start_subscriber(self, name: str, **overrides: Any) -> Sub:
        values: dict[str, Any] = {
            "agent_name": name,
            "pub_agents": [PUB_AGENT],
            "store_path": str(self.workdir / f"store-{name}"),
            "reset": "earliest",
            "announce_interval_s": REFRESH_S,
            "retry_initial_s": 1.0,
            "retry_max_s": 2.0,
            "journal": self.js,
            "blobstore": self.bs,
            **overrides,
        }
        # One SparkSession per agent on the shared JVM: commit settings are per session.
        settings = SubscriberSettings(**values)
        store = DeltaStore(self.spark.newSession(), settings.store_path)
        agent = SubscriberAgent(settings, self.journal, store, self.blobs)
        agent.open()
        agent.start()
        server = HealthServer(agent.health, agent.ready, agent.metrics.render)
        server.start()
        self.subscribers[name] = sub = Sub(agent, server)
        return sub

    def stop_subscriber(self, name: str) -> None:
        sub = self.subscribers.pop(name)
        sub.server.stop()
        sub.agent.stop()

    def queue(self, name: str) -> QueueSummary | None:
        """The publisher's view of subscriber ``name``'s queue (None: not alive)."""
        found = [s for s in self.publisher.queues.summaries() if s.subscriber.agent_name == name]
        return found[0] if found else None

    def queue_name(self, name: str) -> str:
        queue = self.queue(name)
        assert queue is not None, f"{name} is not alive"
        return queue.name

    # ------------------------------------------------------------------ records
    def distribute(self, body: dict[str, Any]) -> int:
        return int(self.client.distribute(body)["offset"])

    def next_offset(self) -> int:
        return self.journal.latest_offset(self.js.topics.package)

    def send_unreadable_package(self, pkg_id: str, path: str) -> int:
        """A package by reference to a blob that is not there: every subscriber fails to read
        it (a retriable failure: the blob might appear), as after a blob store mishap."""
        message = m.PackageMessage(
            pub_sling_id="another-writer",
            pub_agent_name=PUB_AGENT,
            pkg_id=pkg_id,
            req_type=m.ReqType.ADD,
            pkg_type=PACKAGE_TYPE,
            pkg_length=1000,
            pkg_binary_ref="packages/never-stored",
            created_ms=int(time.time() * 1000),
        )
        message.paths.append(path)
        return MessageSender(self.journal, self.js.topics.package).send(message)

    def report_error(self, name: str, offset: int, text: str) -> None:
        """A LogMessage as subscriber ``name`` sends one per failed attempt."""
        agent = self.subscribers[name].agent
        message = m.LogMessage(
            pub_agent_name=PUB_AGENT,
            sub_sling_id=agent.instance_id,
            sub_agent_name=name,
            message=text,
            stacktrace=f"Traceback (most recent call last):\n  {text}",
            offset=offset,
        )
        MessageSender(self.journal, self.js.topics.status).send(message)

    def close(self) -> None:
        for name in list(self.subscribers):
            self.stop_subscriber(name)
        self.client.close()
        self.api.stop()
        self.publisher.stop()
        self.blobs.close()
        self.journal.close()
