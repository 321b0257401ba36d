"""Driving the compose cluster through a fault: background distribution, a watch on every
daemon's /health, and the time from the fault's end until each subscriber imports again.

Requests are the end-to-end workload's (tests/e2e/workload.py) with a run id in their metadata,
so the checks can tell this run's packages from a cluster's earlier ones.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import httpx

from publisher.client import PublisherClient
from tests.containers.compose import PUBLISHERS, SUBSCRIBERS, ComposeCluster
from tests.e2e.cluster import Load, Outcome, post_distribute
from tests.e2e.workload import Request, Workload

RUN_KEY = "compose-run"
# A distribute request waits for Kafka's acknowledgement (SCD_JOURNAL_SEND_TIMEOUT_S, 30 s by
# default) and for the blob store; the client gives up well after either would answer.
CLIENT_TIMEOUT_S = 180.0
# How often the watch asks every daemon's /health during a fault.
HEALTH_EVERY_S = 2.0
# How often recovery is checked: the resolution of the measured times (each check asks the
# engine and every subscriber; at 0.5 s the checks took a visible share of the two cores the
# recovering cluster needed).
RECOVERY_POLL_S = 2.0
# Behind a balancer (Distributor.balanced): how long one try may take before the client tries
# the next replica, and how long a replica that failed is left out (a passive health check).
TRY_TIMEOUT_S = 10.0
BALANCER_HOLD_S = 5.0
# Answers a balancer retries on another replica (None: no answer, or none in time).
RETRIED = frozenset({None, 503})


@dataclass(frozen=True)
class Delivery:
    """One request through the balancer: its tries, each on the next replica, until one was
    acknowledged or every replica failed it."""

    started: float
    seconds: float
    tries: tuple[tuple[str, Outcome], ...]  # (the replica's URL, what it answered)

    @property
    def acknowledged(self) -> bool:
        return self.tries[-1][1].status == 200


@dataclass
class Distributor:
    """POST /distribute of workload requests through the publisher's published port, or
    round-robin over several replicas (``balanced``)."""

    url: str
    token: str
    run_id: str
    workload: Workload
    outcomes: list[Outcome] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Further replicas: each request goes to the next of url and these, and one answered 503 or
    # not in TRY_TIMEOUT_S is sent again to the next (as a fresh request of the workload, so
    # that the log check still finds each request once).
    replicas: tuple[str, ...] = ()
    deliveries: list[Delivery] = field(default_factory=list)

    def __post_init__(self) -> None:
        timeout = TRY_TIMEOUT_S if self.replicas else CLIENT_TIMEOUT_S
        self.clients = {
            url: PublisherClient(url, self.token, timeout_s=timeout).http
            for url in (self.url, *self.replicas)
        }
        self.http = self.clients[self.url]
        self.turn = itertools.count()
        self.left_out: dict[str, float] = {}

    def balanced(self, *urls: str) -> Distributor:
        """A client of the same run over ``urls`` (outcomes, workload and lock shared)."""
        first, *others = urls
        return Distributor(
            first, self.token, self.run_id, self.workload, self.outcomes, self.lock, tuple(others)
        )

    def close(self) -> None:
        for client in self.clients.values():
            client.close()

    def post(self, seq: int, body: dict[str, Any]) -> Outcome:
        if not self.replicas:
            return self._try(self.http, seq, body)
        started = time.monotonic()
        tries: list[tuple[str, Outcome]] = []
        for _ in self.clients:
            url = self._pick()
            outcome = self._try(self.clients[url], seq, body)
            tries.append((url, outcome))
            if outcome.status not in RETRIED:
                break
            with self.lock:
                self.left_out[url] = time.monotonic() + BALANCER_HOLD_S
                if seq in self.workload.requests:  # the same content as a request of its own
                    retry = dataclasses.replace(
                        self.workload.requests[seq], seq=len(self.workload.requests)
                    )
                    self.workload.requests[retry.seq] = retry
                    seq, body = retry.seq, retry.body()
        with self.lock:
            self.deliveries.append(Delivery(started, time.monotonic() - started, tuple(tries)))
        return outcome

    def _pick(self) -> str:
        """The next replica not left out (the next one whatever its state when all are)."""
        urls = list(self.clients)
        with self.lock:
            for _ in urls:
                url = urls[next(self.turn) % len(urls)]
                if self.left_out.get(url, 0.0) <= time.monotonic():
                    return url
            return urls[next(self.turn) % len(urls)]

    def _try(self, http: httpx.Client, seq: int, body: dict[str, Any]) -> Outcome:
        body = {**body, "metadata": {**body.get("metadata", {}), RUN_KEY: self.run_id}}
        outcome = post_distribute(http, seq, body, message_chars=300)
        with self.lock:
            self.outcomes.append(outcome)
        return outcome

    def next_request(self, kind: str | None = None, *, spill: bool | None = None) -> Request:
        with self.lock:
            return self.workload.next(kind, spill=spill)

    def distribute(self, kind: str | None = None, *, spill: bool | None = None) -> Outcome:
        request = self.next_request(kind, spill=spill)
        return self.post(request.seq, request.body())

    def until_accepted(self, timeout_s: float, kind: str = "add-shallow") -> Outcome:
        """Distribute small packages until one is accepted (the publisher recovered)."""
        deadline = time.monotonic() + timeout_s
        while True:
            outcome = self.distribute(kind, spill=False)
            if outcome.status == 200:
                return outcome
            if time.monotonic() > deadline:
                raise AssertionError(f"no distribute accepted within {timeout_s:.0f} s: {outcome}")
            time.sleep(RECOVERY_POLL_S)


def load(distributor: Distributor, threads: int = 2, rate: float = 2.0, **kw: Any) -> Load:
    """A Load through ``distributor``, its threads given the client's timeout to finish."""
    return Load(distributor, threads, rate, join_s=CLIENT_TIMEOUT_S + 10, **kw)


@dataclass
class Probe:
    at: float
    service: str
    answered: bool
    seconds: float


class HealthWatch:
    """Asks the publisher's and every subscriber's /health every few seconds."""

    def __init__(self, compose: ComposeCluster, services: tuple[str, ...] | None = None) -> None:
        self.compose = compose
        self.services = services or (*PUBLISHERS, *SUBSCRIBERS)
        self.probes: list[Probe] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="health-watch", daemon=True)

    def _probe(self, service: str) -> None:
        started = time.monotonic()
        if service in PUBLISHERS:
            answered = self.compose.publisher_health(service) is not None
        else:
            answered = self.compose.subscriber_health(service) is not None
        self.probes.append(Probe(started, service, answered, time.monotonic() - started))

    def _loop(self) -> None:
        while not self.stop.is_set():
            for service in self.services:
                self._probe(service)
            self.stop.wait(HEALTH_EVERY_S)

    def unanswered(self, service: str, start: float, end: float) -> list[Probe]:
        return [
            p
            for p in self.probes
            if p.service == service and start <= p.at <= end and not p.answered
        ]

    def asked(self, service: str, start: float, end: float) -> int:
        return sum(1 for p in self.probes if p.service == service and start <= p.at <= end)

    def __enter__(self) -> HealthWatch:
        self.thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop.set()
        self.thread.join(60)


def wait_imported(
    compose: ComposeCluster, offset: int, since: float, timeout_s: float
) -> dict[str, float]:
    """Wait until every subscriber processed ``offset``; seconds from ``since`` for each."""
    reached: dict[str, float] = {}
    deadline = time.monotonic() + timeout_s
    while len(reached) < len(SUBSCRIBERS):
        for service in SUBSCRIBERS:
            if service in reached:
                continue
            processed = compose.processed_offset(service)
            if processed is not None and processed >= offset:
                reached[service] = round(time.monotonic() - since, 1)
        if time.monotonic() > deadline:
            missing = {s: compose.processed_offset(s) for s in SUBSCRIBERS if s not in reached}
            logs = "\n".join(compose.logs(s) for s in missing)
            raise AssertionError(
                f"not imported offset {offset} within {timeout_s:.0f} s: {missing}\n{logs}"
            )
        if len(reached) < len(SUBSCRIBERS):
            time.sleep(RECOVERY_POLL_S)
    return reached
