"""A running publisher agent taking hostile records, and the checks that it took them well.

The agent runs with all its threads and its HTTP API on a real server (so that a hung request
times out instead of hanging the test). A simulated subscriber, the *sentinel*, writes a valid
announcement and a valid REMOVED_FAILED status after every batch of garbage: once the agent
shows both, its discovery and status readers have read past the batch, and the queue cache has
when it reached the end of the package topic. Then every check runs against what the batch
left behind.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from journal.api import Journal, Position
from journal.messaging import MessageSender
from journal.settings import TopicSettings
from journal.wire import messages as m
from publisher.agent import PublisherAgent
from publisher.api import create_app
from publisher.client import PublisherClient
from publisher.distributed_events import distributed_event
from runtime.http_server import AppServer
from tests.fuzz import records as r
from tests.fuzz.liveness import (
    ThreadWatch,
    distribute_after_garbage,
    increased,
    restart_counts,
)
from tests.publisher.conftest import TOKEN
from tests.waiting import wait_for

# Every answer of the API comes within this bound (a loaded 2-core machine included); a
# request that takes longer counts as hung.
HTTP_TIMEOUT_S = 10.0
# How long the agent may take to read a batch (SQLite polls, Kafka fetches; a busy machine).
READ_TIMEOUT_S = 60.0
# Forged subscribers stay alive this long after their last announcement: short, so that one
# announcing a low offset holds distributed events back for seconds, not the default 30 s.
DISCOVERY_TTL_S = 2.0
# Waiting for a distributed event: forged subscribers must expire first (DISCOVERY_TTL_S),
# then the events loop ticks; minutes would mean events are stuck.
EVENT_TIMEOUT_S = 60.0
# Queues listed per request: all of them (forged subscribers expire within DISCOVERY_TTL_S).
PAGE_LIMIT = 1000
SENTINEL = "fuzz-sentinel"
SENTINEL_INSTANCE = "sentinel-instance"
SENTINEL_QUEUE = f"{SENTINEL_INSTANCE}-{SENTINEL}"
# The sentinel's marker: its progress on a publisher agent that does not exist.
MARKER_AGENT = "fuzz-marker"

Writer = Callable[[Sequence[r.Garbage]], object]


@dataclass
class PublisherUnderFire:
    agent: PublisherAgent
    journal: Journal
    topics: TopicSettings
    write: Writer
    watch: ThreadWatch
    server: AppServer = field(init=False)
    api: PublisherClient = field(init=False)
    http: httpx.Client = field(init=False)
    marker: int = 0
    processed: int = -1  # the sentinel's processed offset on the agent's packages
    restarts_before: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.server = AppServer(create_app(self.agent), name="fuzzed publisher")
        self.server.start()
        self.api = PublisherClient(self.server.url, TOKEN, timeout_s=HTTP_TIMEOUT_S)
        self.http = self.api.http

    def close(self) -> None:
        self.http.close()
        self.server.stop()

    @property
    def agent_name(self) -> str:
        return self.agent.settings.agent_name

    # ------------------------------------------------------------------ the sentinel
    def announce(self) -> None:
        message = m.DiscoveryMessage(
            sub_sling_id=SENTINEL_INSTANCE,
            sub_agent_name=SENTINEL,
            subscriber_configuration=m.SubscriberConfiguration(editable=True, max_retries=3),
            subscriber_state=[
                m.SubscriberState(pub_agent_name=self.agent_name, offset=self.processed),
                m.SubscriberState(pub_agent_name=MARKER_AGENT, offset=self.marker),
            ],
        )
        MessageSender(self.journal, self.topics.discovery).send(message, key=SENTINEL)

    def _mark(self) -> None:
        self.marker += 1
        self.announce()
        status = m.PackageStatusMessage(
            sub_sling_id=SENTINEL_INSTANCE,
            sub_agent_name=SENTINEL,
            pub_agent_name=self.agent_name,
            offset=self.marker,
            status=m.Status.REMOVED_FAILED,
        )
        MessageSender(self.journal, self.topics.status).send(status)

    def _read_past_marker(self) -> bool:
        subscribers = self.get("/subscribers")
        announced = any(
            s["queueName"] == SENTINEL_QUEUE
            and any(
                st["pubAgentName"] == MARKER_AGENT and st["offset"] == self.marker
                for st in s["states"]
            )
            for s in subscribers
        )
        if not announced:
            self.announce()  # the sentinel must stay alive while forged ones expire
            return False
        # One REMOVED_FAILED per marker: the error queue size tells the status reader's progress.
        queues = self.get(f"/queues?limit={PAGE_LIMIT}")
        if not any(
            q["name"] == SENTINEL_QUEUE and q["errorQueueSize"] == self.marker for q in queues
        ):
            return False
        latest = self.journal.latest_offset(self.topics.package)
        return self.agent.cache.next_offset >= latest

    # ------------------------------------------------------------------ firing
    def fire(self, batch: Sequence[r.Garbage]) -> None:
        """Write ``batch`` and wait until the agent read it (the sentinel's records after it)."""
        self.write(batch)
        self._mark()
        try:
            wait_for(self._read_past_marker, READ_TIMEOUT_S, "the publisher to read the batch")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; {self.diagnosis()}") from None

    def diagnosis(self) -> str:
        """Why the agent may not have got there: dead threads, restarted loops, the cache."""
        latest = self.journal.latest_offset(self.topics.package)
        restarted = increased(self.restarts_before, self.restart_counts())
        return (
            f"threads died: {self.watch.dead()}; loops restarted: {restarted}; queue cache at "
            f"{self.agent.cache.next_offset} of {latest} package offsets"
        )

    # ------------------------------------------------------------------ checks
    def get(self, path: str) -> Any:
        answer = self.http.get(path)
        assert answer.status_code == 200, f"GET {path}: {answer.status_code} {answer.text[:500]}"
        return answer.json()

    def restart_counts(self) -> dict[str, float]:
        return restart_counts(self.http.get("/metrics").text)

    def check_alive(self, what: str) -> None:
        """Threads alive, no loop restarted, every view answers (queue pages of forged
        subscribers may be 404, never 5xx)."""
        dead = self.watch.dead()
        assert not dead, f"after {what}: threads died: {dead}"
        restarted = increased(self.restarts_before, self.restart_counts())
        assert not restarted, f"after {what}: loops restarted: {restarted}"
        ready = self.http.get("/ready")
        assert ready.status_code == 200, f"after {what}: /ready {ready.status_code} {ready.text}"
        self.get("/agent")
        self.get("/subscribers")
        for queue in self.get(f"/queues?limit={PAGE_LIMIT}"):
            name = quote(queue["name"], safe="")
            pages = [f"/queues/{name}", f"/queues/{name}/errors"]
            if queue.get("errorQueue"):  # the error queue's own name, where it has a page
                pages.append(f"/queues/{quote(queue['errorQueue'], safe='')}")
            for page in pages:
                answer = self.http.get(page)
                assert answer.status_code < 500, (
                    f"after {what}: GET {page[:120]}: {answer.status_code} {answer.text[:300]}"
                )

    def distribute(self, path: str) -> int:
        return distribute_after_garbage(self.api, path)

    def check_package_flows(self, path: str) -> int:
        """A package distributed now is in the sentinel's queue, and once the sentinel has
        processed it, the leader sends its distributed event."""
        self.processed = self.journal.latest_offset(self.topics.package) - 1
        self.announce()
        # A leader's first events tick records where events start: the subscribers' position
        # then. On a broker just started, electing the leader takes seconds; a package the
        # sentinel processed before that tick is before the start and gets no event.
        wait_for(
            lambda: self.agent.events.last_offset is not None,
            READ_TIMEOUT_S,
            "the leader's distributed events to start",
        )
        offset = self.distribute(path)

        def queued() -> bool:
            self.announce()
            page = self.http.get(f"/queues/{SENTINEL_QUEUE}?limit=10")
            if page.status_code == 404:  # the sentinel's first announcement not read yet
                return False
            assert page.status_code == 200, f"sentinel's queue: {page.status_code} {page.text}"
            return any(item["offset"] == offset for item in page.json()["items"])

        wait_for(queued, READ_TIMEOUT_S, f"the package at {offset} in the sentinel's queue")
        self.processed = offset

        def event_sent() -> bool:
            self.announce()
            return offset in self.event_offsets()

        wait_for(event_sent, EVENT_TIMEOUT_S, f"the distributed event of offset {offset}")
        return offset

    def event_offsets(self) -> set[int]:
        found: set[int] = set()
        topic = self.topics.event
        ends = {
            p: self.journal.latest_offset(topic, p) for p in range(self.journal.partitions(topic))
        }
        with self.journal.consumer(topic, Position.earliest()) as consumer:
            deadline = time.monotonic() + READ_TIMEOUT_S
            while any(consumer.positions().get(p, 0) < end for p, end in ends.items()):
                assert time.monotonic() < deadline, f"could not read {topic} to its end"
                for record in consumer.poll(0.2):
                    try:
                        event = distributed_event(record.headers, record.value)
                    except (ValueError, RecursionError):
                        continue  # garbage of ours
                    if (
                        isinstance(event, dict)
                        and event.get("pubAgentName") == self.agent_name
                        and event.get("application") != "evil"
                        and isinstance(event.get("offset"), int)
                    ):
                        found.add(event["offset"])
        return found
