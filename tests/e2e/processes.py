"""A small process manager for the end-to-end tests: one publisher daemon and several
subscriber daemons (``scd publisher`` / ``scd subscriber``, as deployed) on the real Kafka broker
and S3 server, each subscriber with its own settings, health port and local Delta store.

Every daemon runs in its own session (its pid is its process group id), so a test can signal
the daemon alone (SIGTERM, as an orchestrator does) or its whole group (SIGKILL: the Python
process and its Spark JVM die at once, like a killed container), and teardown leaves nothing
behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

from journal.api import Position
from journal.kafka import KafkaJournal
from journal.wire import messages as m
from publisher.events import distributed_event
from tests.e2e.workload import SEQ_KEY
from tests.waiting import wait_for

T = TypeVar("T")

# The command line installed next to this interpreter (the venv's bin/).
SCD = Path(sys.executable).with_name("scd")
TOKEN = "e2e-test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# The publisher is ready within seconds; 120 s covers a loaded machine and topic creation.
PUBLISHER_START_TIMEOUT_S = 120.0
# A subscriber answers once its Spark driver runs and its store is open: 20-40 s each on a
# 2-core machine when several JVMs start at once, minutes on a busy one.
SUBSCRIBER_START_TIMEOUT_S = 400.0
# SIGTERM: a subscriber finishes the import in progress (up to 60 s) and stops Spark; the
# publisher lets requests answer for up to 35 s.
SUBSCRIBER_STOP_TIMEOUT_S = 120.0
PUBLISHER_STOP_TIMEOUT_S = 60.0
# After a daemon exits, its Spark JVM follows within seconds.
GROUP_EXIT_TIMEOUT_S = 30.0
HTTP_TIMEOUT_S = 60.0
PROBE_TIMEOUT_S = 5.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Zombies of the group still count for killpg; only live members matter.
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


class Daemon:
    """One daemon process, restartable with the same settings and log file."""

    def __init__(self, name: str, command: str, env: dict[str, str], workdir: Path) -> None:
        self.name = name
        self.command = command  # scd's subcommand: publisher or subscriber
        self.env = env
        self.workdir = workdir
        self.log_path = workdir / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def pid(self) -> int:
        assert self.process is not None, f"{self.name} was never started"
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        assert not self.alive, f"{self.name} is already running"
        self.workdir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"\n===== start {self.starts + 1} of {self.name} =====\n".encode())
            self.process = subprocess.Popen(
                [str(SCD), self.command],
                env=self.env,
                cwd=self.workdir,  # Spark's warehouse and Derby files land here
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1

    def signal(self, signum: signal.Signals) -> None:
        """Signal the daemon process itself (SIGTERM: clean shutdown)."""
        assert self.process is not None
        self.process.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL the daemon's whole process group: the process and its Spark JVM."""
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)

    def wait(self, timeout_s: float) -> int:
        """Wait for the daemon to exit and its process group to be gone; its exit code."""
        assert self.process is not None
        try:
            code = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self.name} (pid {self.pid}) still runs {timeout_s:.0f} s after the signal\n"
                + self.log_tail()
            ) from None
        deadline = time.monotonic() + GROUP_EXIT_TIMEOUT_S
        while _group_alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _group_alive(self.pid):  # a child outlived its parent: do not leak it
            os.killpg(self.pid, signal.SIGKILL)
        return code

    def stop(self, timeout_s: float) -> int | None:
        """SIGTERM, then SIGKILL of the group after ``timeout_s``; None if it was not running."""
        if self.process is None:
            return None
        if self.alive:
            self.signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.wait(GROUP_EXIT_TIMEOUT_S)

    def dump_stacks(self) -> None:
        """Have a running daemon write every thread's stack to its log (SIGUSR1)."""
        if self.alive:
            self.signal(signal.SIGUSR1)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return f"(no log at {self.log_path})"
        return f"--- last lines of {self.log_path} ---\n" + "\n".join(text[-lines:])


@dataclass(frozen=True)
class SubscriberSpec:
    name: str
    editable: bool = False
    max_retries: int = -1
    reset: str = "latest"
    retry_initial_s: float = 1.0
    retry_max_s: float = 4.0


@dataclass
class Subscriber:
    spec: SubscriberSpec
    daemon: Daemon
    port: int
    store: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def health(self) -> dict[str, Any] | None:
        if not self.daemon.alive:
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


@dataclass
class Cluster:
    env: dict[str, str]
    workdir: Path
    agent_name: str
    topics: dict[str, str]
    bootstrap: str
    publisher_port: int
    publisher: Daemon = field(init=False)
    subscribers: dict[str, Subscriber] = field(default_factory=dict)
    outcomes: list[Outcome] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.publisher = Daemon(
            "publisher",
            "publisher",
            {
                **self.env,
                "SCD_PUBLISHER_PORT": str(self.publisher_port),
                "SCD_PUBLISHER_API_TOKEN": TOKEN,
            },
            self.workdir / "publisher",
        )
        self.http = httpx.Client(
            base_url=f"http://127.0.0.1:{self.publisher_port}", headers=AUTH, timeout=HTTP_TIMEOUT_S
        )
        self.journal = KafkaJournal(self.bootstrap)

    # ------------------------------------------------------------------ processes
    def add_subscriber(self, spec: SubscriberSpec) -> Subscriber:
        port = free_port()
        store = self.workdir / "stores" / spec.name
        env = {
            **self.env,
            "SCD_SUBSCRIBER_AGENT_NAME": spec.name,
            "SCD_SUBSCRIBER_PUB_AGENTS": self.agent_name,
            "SCD_SUBSCRIBER_STORE_PATH": str(store),
            "SCD_SUBSCRIBER_HTTP_PORT": str(port),
            "SCD_SUBSCRIBER_EDITABLE": str(spec.editable).lower(),
            "SCD_SUBSCRIBER_MAX_RETRIES": str(spec.max_retries),
            "SCD_SUBSCRIBER_RESET": spec.reset,
            "SCD_SUBSCRIBER_RETRY_INITIAL_S": str(spec.retry_initial_s),
            "SCD_SUBSCRIBER_RETRY_MAX_S": str(spec.retry_max_s),
        }
        daemon = Daemon(spec.name, "subscriber", env, self.workdir / spec.name)
        subscriber = Subscriber(spec, daemon, port, store)
        self.subscribers[spec.name] = subscriber
        return subscriber

    def publisher_ready(self) -> bool:
        if not self.publisher.alive:
            raise AssertionError("the publisher exited\n" + self.publisher.log_tail())
        try:
            return self.http.get("/ready", timeout=PROBE_TIMEOUT_S).status_code == 200
        except httpx.HTTPError:
            return False

    def start_publisher(self) -> None:
        self.publisher.start()
        wait_for(self.publisher_ready, PUBLISHER_START_TIMEOUT_S, "the publisher to be ready")

    def wait_subscriber_up(self, name: str) -> None:
        subscriber = self.subscribers[name]

        def up() -> bool:
            if not subscriber.daemon.alive:
                raise AssertionError(f"{name} exited\n" + subscriber.daemon.log_tail())
            health = subscriber.health()
            return health is not None and health.get("instanceId") is not None

        wait_for(up, SUBSCRIBER_START_TIMEOUT_S, f"{name} to answer on {subscriber.url}/health")

    def ensure_running(self) -> None:
        """Start whatever is not running (a test run alone, or after an earlier failure)."""
        if not self.publisher.alive:
            self.start_publisher()
        stopped = [s for s in self.subscribers.values() if not s.daemon.alive]
        for subscriber in stopped:
            subscriber.daemon.start()
        for subscriber in stopped:
            self.wait_subscriber_up(subscriber.spec.name)

    def stop_all(self) -> None:
        for subscriber in self.subscribers.values():
            if subscriber.daemon.alive:
                subscriber.daemon.signal(signal.SIGTERM)
        for subscriber in self.subscribers.values():
            subscriber.daemon.stop(SUBSCRIBER_STOP_TIMEOUT_S)
        self.publisher.stop(PUBLISHER_STOP_TIMEOUT_S)

    def close(self) -> None:
        self.http.close()
        self.journal.close()

    # ------------------------------------------------------------------ REST
    def get(self, path: str) -> Any:
        answer = self.http.get(path)
        assert answer.status_code == 200, f"GET {path}: {answer.status_code} {answer.text}"
        return answer.json()

    def distribute(self, seq: int, body: dict[str, Any]) -> Outcome:
        started = time.monotonic()
        try:
            answer = self.http.post("/distribute", json=body)
        except httpx.HTTPError as exc:
            outcome = Outcome(seq, None, message=f"{type(exc).__name__}: {exc}")
        else:
            if answer.status_code == 200:
                data = answer.json()
                outcome = Outcome(seq, 200, int(data["offset"]), bool(data["spilled"]))
            else:
                outcome = Outcome(seq, answer.status_code, message=answer.text)
        outcome.started = started
        outcome.seconds = time.monotonic() - started
        self.outcomes.append(outcome)
        return outcome

    def accepted(self) -> dict[int, int]:
        """seq -> offset of every request answered 200."""
        return {o.seq: o.offset for o in self.outcomes if o.status == 200 and o.offset is not None}

    # ------------------------------------------------------------------ topics
    def latest_offset(self) -> int:
        """Offset the next package will get (every package is at a lower one)."""
        return self.journal.latest_offset(self.topics["package"])

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
