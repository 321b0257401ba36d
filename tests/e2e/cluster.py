"""The end-to-end tests' view of the native cluster: one publisher daemon and several
subscriber daemons (``scd publisher`` / ``scd subscriber``) on the real Kafka broker and S3
server, each subscriber with its own settings, health port and local Delta store, started and
stopped by deploy/cluster.sh (tests/cluster_script.py), driven through the REST API and read
back from the journal's topics.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import httpx

from journal.api import Position
from journal.kafka.journal import KafkaJournal
from journal.wire import messages as m
from publisher.client import PublisherClient
from publisher.distributed_events import distributed_event
from tests.cluster_script import ClusterScript, Process
from tests.e2e.workload import SEQ_KEY
from tests.services import last_record_offset
from tests.waiting import wait_for

TOKEN = "e2e-test-token-0123456789abcdef"
HTTP_TIMEOUT_S = 60.0
PROBE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class SubscriberSpec:
    """subscriber-``index`` of the cluster and its own settings."""

    index: int
    editable: bool = False
    max_retries: int = -1
    reset: str = "latest"
    retry_initial_s: float = 1.0
    retry_max_s: float = 4.0

    @property
    def name(self) -> str:
        return f"subscriber-{self.index}"

    def settings(self) -> dict[str, str]:
        """Its settings as deploy/cluster.sh takes them."""
        prefix = f"SCD_CLUSTER_SUBSCRIBER_{self.index}_"
        return {
            f"{prefix}EDITABLE": str(self.editable).lower(),
            f"{prefix}MAX_RETRIES": str(self.max_retries),
            f"{prefix}RESET": self.reset,
            f"{prefix}RETRY_INITIAL_S": str(self.retry_initial_s),
            f"{prefix}RETRY_MAX_S": str(self.retry_max_s),
        }


@dataclass
class Subscriber:
    spec: SubscriberSpec
    process: Process
    url: str
    store: Path

    def health(self) -> dict[str, Any] | None:
        if not self.process.alive:
            return None
        try:
            answer = httpx.get(f"{self.url}/health", timeout=PROBE_TIMEOUT_S)
        except httpx.HTTPError:
            return None
        return answer.json() if answer.status_code == 200 else None

    def processed_offset(self) -> int | None:
        health = self.health()
        return None if health is None else health.get("processedOffset")


@dataclass(frozen=True)
class LoggedPackage:
    offset: int
    pkg_id: str
    seq: int | None
    action: str
    by_reference: bool


@dataclass
class Outcome:
    """What the HTTP client saw of one distribute request."""

    seq: int
    status: int | None  # None: no answer (connection refused or cut)
    offset: int | None = None
    spilled: bool | None = None
    message: str = ""
    started: float = 0.0  # time.monotonic() when the request was sent
    seconds: float = 0.0


def post_distribute(
    http: httpx.Client, seq: int, body: dict[str, Any], message_chars: int | None = None
) -> Outcome:
    """POST /distribute once: the answer (or the error) as an Outcome, timed; ``message_chars``
    cuts an error answer's text."""
    started = time.monotonic()
    try:
        answer = http.post("/distribute", json=body)
    except httpx.HTTPError as exc:
        outcome = Outcome(seq, None, message=f"{type(exc).__name__}: {exc}")
    else:
        if answer.status_code == 200:
            data = answer.json()
            outcome = Outcome(seq, 200, int(data["offset"]), bool(data["spilled"]))
        else:
            outcome = Outcome(seq, answer.status_code, message=answer.text[:message_chars])
    outcome.started = started
    outcome.seconds = time.monotonic() - started
    return outcome


def status_counts(outcomes: list[Outcome]) -> dict[str, int]:
    """How many outcomes had each status ("no answer": none)."""
    counts = Counter("no answer" if o.status is None else str(o.status) for o in outcomes)
    return dict(sorted(counts.items()))


class Distributing(Protocol):
    """What a Load sends through: a distributor of the run's workload and its outcomes."""

    @property
    def lock(self) -> threading.Lock: ...

    @property
    def outcomes(self) -> list[Outcome]: ...

    def distribute(self, kind: str | None = None, *, spill: bool | None = None) -> Outcome: ...


class Load:
    """Packages from a few threads, at most ``rate`` requests per second in all, until the
    block ends: random ones, or of the ``kind`` and ``spill`` given. On leaving the block each
    thread gets ``join_s`` to finish its request."""

    def __init__(
        self,
        distributor: Distributing,
        threads: int = 2,
        rate: float = 2.0,
        kind: str | None = None,
        spill: bool | None = None,
        join_s: float = 120.0,
    ) -> None:
        self.distributor = distributor
        self.kind, self.spill = kind, spill
        self.pause_s = threads / rate
        self.join_s = join_s
        self.stop = threading.Event()
        self.first = len(distributor.outcomes)
        self.threads = [
            threading.Thread(target=self._loop, name=f"load-{i}", daemon=True)
            for i in range(threads)
        ]

    def _loop(self) -> None:
        while not self.stop.is_set():
            self.distributor.distribute(self.kind, spill=self.spill)
            self.stop.wait(self.pause_s)

    def outcomes(self) -> list[Outcome]:
        with self.distributor.lock:
            return self.distributor.outcomes[self.first :]

    def accepted_after(self, since: float) -> int:
        return sum(1 for o in self.outcomes() if o.status == 200 and o.started >= since)

    def wait_accepted(self, count: int, what: str, timeout_s: float = 300) -> None:
        """Wait until ``count`` requests sent from now on were accepted."""
        since = time.monotonic()
        wait_for(
            lambda: self.accepted_after(since) >= count,
            timeout_s,
            f"{count} packages accepted {what} ({status_counts(self.outcomes())} so far)",
        )

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(self.join_s)


@dataclass
class Cluster:
    script: ClusterScript
    agent_name: str
    topics: dict[str, str]
    bootstrap: str
    specs: list[SubscriberSpec]
    subscribers: dict[str, Subscriber] = field(init=False)
    outcomes: list[Outcome] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.subscribers = {
            spec.name: Subscriber(
                spec,
                self.script.process(spec.name),
                self.script.subscriber_url(spec.index),
                self.script.directory / "stores" / spec.name,
            )
            for spec in self.specs
        }
        self.http = PublisherClient(self.script.publisher_url, TOKEN, timeout_s=HTTP_TIMEOUT_S).http
        self.journal = KafkaJournal(self.bootstrap)

    @property
    def publisher(self) -> Process:
        return self.script.process("publisher")

    def ensure_running(self) -> None:
        """Start whatever is not running (a test run alone, after a fault or a failure)."""
        self.script.up()

    def close(self) -> None:
        self.http.close()
        self.journal.close()

    # ------------------------------------------------------------------ REST
    def get(self, path: str) -> Any:
        answer = self.http.get(path)
        assert answer.status_code == 200, f"GET {path}: {answer.status_code} {answer.text}"
        return answer.json()

    def distribute(self, seq: int, body: dict[str, Any]) -> Outcome:
        outcome = post_distribute(self.http, seq, body)
        self.outcomes.append(outcome)
        return outcome

    def accepted(self) -> dict[int, int]:
        """seq -> offset of every request answered 200."""
        return {o.seq: o.offset for o in self.outcomes if o.status == 200 and o.offset is not None}

    # ------------------------------------------------------------------ topics
    def latest_offset(self) -> int:
        """Offset the next package will get (every package is at a lower one)."""
        return self.journal.latest_offset(self.topics["package"])

    def last_package_offset(self) -> int:
        """Offset of the last package on the log (the leader's transaction markers follow it)."""
        return last_record_offset(self.journal, self.topics["package"])

    def _read(self, topic: str) -> list[tuple[int, int, dict[str, str], bytes]]:
        ends = {
            p: self.journal.latest_offset(topic, p) for p in range(self.journal.partitions(topic))
        }
        found: list[tuple[int, int, dict[str, str], bytes]] = []
        with self.journal.consumer(topic, Position.earliest()) as consumer:
            deadline = time.monotonic() + HTTP_TIMEOUT_S
            while any(consumer.positions().get(p, 0) < end for p, end in ends.items()):
                if time.monotonic() > deadline:
                    raise AssertionError(f"could not read {topic} to its end {ends}")
                for record in consumer.poll(1.0):
                    if record.offset < ends[record.partition]:
                        found.append(
                            (record.partition, record.offset, dict(record.headers), record.value)
                        )
        return found

    def packages(self) -> list[LoggedPackage]:
        """Every package on the package topic, in offset order."""
        out = []
        for _, offset, headers, value in self._read(self.topics["package"]):
            message = m.decode(headers, value)
            assert isinstance(message, m.PackageMessage), f"offset {offset}: {message}"
            seq = message.metadata.get(SEQ_KEY)
            out.append(
                LoggedPackage(
                    offset,
                    message.pkg_id,
                    int(seq) if seq is not None else None,
                    m.ReqType.Name(message.req_type),
                    bool(message.pkg_binary_ref),
                )
            )
        return sorted(out, key=lambda p: p.offset)

    def events(self) -> list[dict[str, Any]]:
        """This publisher agent's distributed events, in the order of each partition."""
        records = sorted(self._read(self.topics["event"]), key=lambda r: (r[0], r[1]))
        events = [distributed_event(headers, value) for _, _, headers, value in records]
        return [e for e in events if e is not None and e.get("pubAgentName") == self.agent_name]
