"""The compose cluster of deploy/docker-compose.yml as the container tests and
bench/compose_stream.py drive it.

``deploy/compose.sh`` brings it up and down and prints the settings of a client on this
machine; ``docker compose`` injects the faults a user would (pause, kill, start); ``docker
network`` partitions a container; ``slow_link.py`` delays and drops a container's outgoing
packets, run from the host in the container's network namespace (``nsenter``), so the images
need neither ``iptables`` nor NET_ADMIN. Everything else is read back: container state and
addresses from ``docker inspect``, the daemons' ``/health``, and the memory of each
container's processes from /proc.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.services import DEPLOY_DIR, REPO_ROOT

COMPOSE_SH = DEPLOY_DIR / "compose.sh"
COMPOSE_FILE = DEPLOY_DIR / "docker-compose.yml"
SUBSCRIBERS = ("subscriber-1", "subscriber-2", "subscriber-3")
KAFKA = "kafka"
# Two replicas of one publisher agent; the first is SCD_PUBLISHER_URL's.
PUBLISHERS = ("publisher", "publisher-2")
PUBLISHER, PUBLISHER_2 = PUBLISHERS
# The compose network Kafka, S3 and the subscribers are on; the publishers are on front too.
DEFAULT_NETWORK = "default"
# The publishers' API inside their containers (SCD_PUBLISHER_PORT), where they reach each other.
PUBLISHER_API_PORT = 8080
KAFKA_PORT = 9092
# The subscribers' health endpoint inside their containers (SCD_SUBSCRIBER_HTTP_PORT in the
# compose file); it is not published, the host reaches it on the container's address.
SUBSCRIBER_HEALTH_PORT = 8090
# `up` may build every image first (tens of minutes from scratch on 2 cores); with the images
# built it starts three Spark drivers: minutes on a busy machine.
UP_TIMEOUT_S = 2400.0
# `down` lets each subscriber finish its import (stop_grace_period 90 s), all in parallel.
DOWN_TIMEOUT_S = 300.0
COMMAND_TIMEOUT_S = 120.0
PAUSE_ATTEMPTS = 5
PROBE_TIMEOUT_S = 5.0
# The variable that lets tests and benches fail instead of skipping when no cluster can run.
REQUIRED_VARIABLE = "SCD_TEST_COMPOSE"


class ComposeError(RuntimeError):
    """A docker or compose command failed; the message carries its output."""


def _run(
    args: list[str], timeout: float = COMMAND_TIMEOUT_S, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            args,
            cwd=REPO_ROOT,
            env=dict(env if env is not None else os.environ),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ComposeError(f"{shlex.join(args)} still ran after {timeout:.0f} s") from exc


def _checked(args: list[str], timeout: float = COMMAND_TIMEOUT_S) -> str:
    done = _run(args, timeout)
    if done.returncode != 0:
        raise ComposeError(
            f"{shlex.join(args)} exited with {done.returncode}\n{done.stdout}{done.stderr}"
        )
    return done.stdout


def unavailable_reason() -> str | None:
    """Why no compose cluster can run here (None: an engine answers, the compose plugin and
    deploy/compose.sh exist)."""
    if not COMPOSE_SH.exists():
        return f"{COMPOSE_SH.relative_to(REPO_ROOT)} does not exist"
    try:
        engine = _run(["docker", "info", "--format", "{{.ServerVersion}}"], timeout=20)
    except (OSError, ComposeError) as exc:
        return f"no Docker engine answers ({exc})"
    if engine.returncode != 0:
        return f"no Docker engine answers: {engine.stderr.strip()[:200]}"
    plugin = _run(["docker", "compose", "version"], timeout=20)
    if plugin.returncode != 0:
        return "the docker compose plugin is not installed (deploy/docker.sh installs it)"
    return None


@dataclass(frozen=True)
class Endpoints:
    """What a client on this machine needs (``deploy/compose.sh env``)."""

    publisher_url: str
    publisher_urls: tuple[str, ...]  # one per replica, in PUBLISHERS' order
    token: str
    s3_endpoint: str
    s3_access_key: str
    s3_secret_key: str
    s3_region: str
    kafka_bootstrap: str
    content_bucket: str
    blob_bucket: str

    def url_of(self, publisher: str) -> str:
        """The published API address of one publisher replica (a service of PUBLISHERS)."""
        return self.publisher_urls[PUBLISHERS.index(publisher)]

    def store(self, subscriber: str) -> str:
        """The subscriber's Delta table (SCD_SUBSCRIBER_STORE_PATH in the compose file)."""
        return f"s3a://{self.content_bucket}/{subscriber}"


def _first(values: Mapping[str, str], *names: str, default: str | None = None) -> str:
    for name in names:
        if values.get(name):
            return values[name]
    if default is not None:
        return default
    raise ComposeError(f"deploy/compose.sh env printed none of {names}: {sorted(values)}")


def parse_env(text: str) -> dict[str, str]:
    """``NAME=value`` lines, with or without ``export`` and shell quoting."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] == ["export"]:
            words = words[1:]
        if len(words) == 1 and "=" in words[0]:
            name, _, value = words[0].partition("=")
            values[name] = value
    return values


@dataclass
class Container:
    """One service's container as ``docker inspect`` shows it."""

    service: str
    attrs: dict[str, Any]

    @property
    def id(self) -> str:
        return str(self.attrs["Id"])

    @property
    def pid(self) -> int:
        return int(self.attrs["State"]["Pid"])

    @property
    def status(self) -> str:
        return str(self.attrs["State"]["Status"])

    @property
    def started_at(self) -> str:
        return str(self.attrs["State"]["StartedAt"])

    @property
    def restart_count(self) -> int:
        return int(self.attrs.get("RestartCount", 0))

    @property
    def networks(self) -> dict[str, Any]:
        return dict(self.attrs["NetworkSettings"]["Networks"] or {})

    @property
    def address(self) -> str | None:
        for network in self.networks.values():
            if network.get("IPAddress"):
                return str(network["IPAddress"])
        return None


class ComposeCluster:
    """deploy/docker-compose.yml through deploy/compose.sh and the docker CLI."""

    def __init__(self) -> None:
        self._endpoints: Endpoints | None = None
        self._ids: dict[str, str] = {}

    # ------------------------------------------------------------------ lifecycle
    def script(self, *args: str, timeout: float = COMMAND_TIMEOUT_S) -> str:
        return _checked(["bash", str(COMPOSE_SH), *args], timeout)

    def up(self) -> float:
        """``deploy/compose.sh up``; returns the seconds it took."""
        started = time.monotonic()
        self.script("up", timeout=UP_TIMEOUT_S)
        self._endpoints = None
        return time.monotonic() - started

    def down(self, *, volumes: bool = False) -> float:
        started = time.monotonic()
        self.script("down", *(["-v"] if volumes else []), timeout=DOWN_TIMEOUT_S)
        return time.monotonic() - started

    def endpoints(self) -> Endpoints:
        if self._endpoints is None:
            values = parse_env(self.script("env"))
            kafka_port = _dotenv().get("SCD_COMPOSE_KAFKA_PORT", "29092")
            first = _first(values, "SCD_PUBLISHER_URL")
            self._endpoints = Endpoints(
                publisher_url=first,
                publisher_urls=tuple(
                    _first(values, "SCD_COMPOSE_PUBLISHER_URLS", default=first).split()
                ),
                token=_first(values, "SCD_PUBLISHER_API_TOKEN"),
                s3_endpoint=_first(
                    values, "SCD_BLOB_ENDPOINT_URL", "SCD_S3_ENDPOINT", "AWS_ENDPOINT_URL"
                ),
                s3_access_key=_first(
                    values, "SCD_BLOB_ACCESS_KEY", "SCD_S3_ACCESS_KEY", "AWS_ACCESS_KEY_ID"
                ),
                s3_secret_key=_first(
                    values, "SCD_BLOB_SECRET_KEY", "SCD_S3_SECRET_KEY", "AWS_SECRET_ACCESS_KEY"
                ),
                s3_region=_first(
                    values,
                    "SCD_BLOB_REGION",
                    "SCD_S3_REGION",
                    "AWS_DEFAULT_REGION",
                    "AWS_REGION",
                    default="us-east-1",
                ),
                kafka_bootstrap=_first(
                    values,
                    "SCD_JOURNAL_BOOTSTRAP_SERVERS",
                    "SCD_KAFKA_BOOTSTRAP",
                    default=f"127.0.0.1:{kafka_port}",
                ),
                content_bucket=_first(values, "SCD_COMPOSE_CONTENT_BUCKET", default="scd-content"),
                blob_bucket=_first(values, "SCD_BLOB_BUCKET", default="scd-blobs"),
            )
        return self._endpoints

    # ------------------------------------------------------------------ compose commands
    def compose(self, *args: str, timeout: float = COMMAND_TIMEOUT_S) -> str:
        """``docker compose ARGS`` on the cluster's files and deploy/.env (through compose.sh,
        which knows the image set)."""
        return self.script(*args, timeout=timeout)

    def services(self) -> list[str]:
        return self.compose("config", "--services").split()

    def s3_service(self) -> str:
        """The S3 server's service (its name depends on the image set)."""
        names = [
            s
            for s in self.services()
            if ("s3" in s or "minio" in s) and not s.endswith(("buckets", "-mc", "init"))
        ]
        if len(names) != 1:
            raise ComposeError(f"cannot tell the S3 server's service among {self.services()}")
        return names[0]

    def container(self, service: str) -> Container:
        """The service's container as the engine sees it now. Its id is remembered: the tests
        poll subscribers every few seconds, and a `docker compose ps` per poll (a compose
        start and a parse of the file) took CPU from the cluster it waited for."""
        known = self._ids.get(service)
        if known is not None:
            done = _run(["docker", "inspect", known])
            if done.returncode == 0:
                return Container(service, json.loads(done.stdout)[0])
            del self._ids[service]  # removed or replaced (down, up, a recreate)
        ids = self.compose("ps", "-a", "-q", service).split()
        if len(ids) != 1:
            raise ComposeError(f"{service}: {len(ids)} containers ({ids})")
        attrs = json.loads(_checked(["docker", "inspect", ids[0]]))[0]
        self._ids[service] = ids[0]
        return Container(service, attrs)

    def pause(self, service: str) -> None:
        # runc gives up freezing a container whose tasks are in the middle of a system call
        # (seen on a loaded machine: "unable to freeze"), and leaves it running: ask again.
        for attempt in range(1, PAUSE_ATTEMPTS + 1):
            try:
                self.compose("pause", service)
                return
            except ComposeError as exc:
                if "unable to freeze" not in str(exc) or attempt == PAUSE_ATTEMPTS:
                    raise
                time.sleep(1.0)

    def unpause(self, service: str) -> None:
        self.compose("unpause", service)

    def kill(self, service: str) -> None:
        self.compose("kill", service)

    def start(self, service: str) -> None:
        self.compose("start", service)

    def files(self, service: str, folder: str, name: str) -> list[str]:
        """Paths of the files called ``name`` (a ``find -name`` pattern) under ``folder`` of the
        service's container."""
        found = _checked(
            ["docker", "exec", self.container(service).id, "find", folder, "-name", name]
        )
        return found.split()

    def logs(self, service: str, lines: int = 60) -> str:
        done = _run(["bash", str(COMPOSE_SH), "logs", "--no-color", "--tail", str(lines), service])
        return f"--- last {lines} log lines of {service} ---\n{done.stdout}{done.stderr}"

    # ------------------------------------------------------------------ network faults
    def disconnect(self, service: str, only: str | None = None) -> list[tuple[str, list[str]]]:
        """Cut the container off every network, or off the compose network ``only`` (e.g.
        DEFAULT_NETWORK: the container keeps its others); returns (network, aliases) to
        reconnect."""
        container = self.container(service)
        cut = []
        for name, network in container.networks.items():
            if only is not None and name != only and not name.endswith(f"_{only}"):
                continue
            aliases = [a for a in network.get("Aliases") or [] if not container.id.startswith(a)]
            _checked(["docker", "network", "disconnect", name, container.id])
            cut.append((name, aliases))
        if not cut:
            raise ComposeError(f"{service} is on no network {only!r}: {sorted(container.networks)}")
        return cut

    def reconnect(self, service: str, networks: list[tuple[str, list[str]]]) -> None:
        container = self.container(service)
        for name, aliases in networks:
            options = [f"--alias={alias}" for alias in aliases]
            _checked(["docker", "network", "connect", *options, name, container.id])

    def connects(self, service: str, host: str, port: int) -> bool:
        """Whether a TCP connection from inside the service's container to host:port opens
        (a name its networks do not resolve does not)."""
        address = f"({host!r}, {port})"
        probe = f"import socket; socket.create_connection({address}, timeout={PROBE_TIMEOUT_S})"
        done = _run(["docker", "exec", self.container(service).id, "python", "-c", probe], 30)
        return done.returncode == 0

    def _in_netns(self, service: str, *command: str) -> str:
        return _checked(["nsenter", "-t", str(self.container(service).pid), "-n", *command])

    def slow_link(self, service: str, delay_ms: int, jitter_ms: int, loss: float) -> SlowLink:
        """Delays the container's outgoing packets by ``delay_ms`` +- ``jitter_ms`` and drops
        ``loss`` of them (``tests/containers/slow_link.py``: NFQUEUE, since these kernels have
        no netem); undone by the returned handle's ``clear``."""
        pid = str(self.container(service).pid)
        rule = [
            "OUTPUT",
            "-o",
            "eth0",
            "-j",
            "NFQUEUE",
            "--queue-num",
            str(SLOW_LINK_QUEUE),
            "--queue-bypass",
        ]
        daemon = subprocess.Popen(
            [
                "nsenter",
                "-t",
                pid,
                "-n",
                sys.executable,
                str(SLOW_LINK_SCRIPT),
                "--queue",
                str(SLOW_LINK_QUEUE),
                "--delay-ms",
                str(delay_ms),
                "--jitter-ms",
                str(jitter_ms),
                "--loss",
                str(loss),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert daemon.stdout is not None
        if daemon.stdout.readline().strip() != "ready":
            daemon.kill()
            raise ComposeError(f"the slow-link daemon did not start: {daemon.communicate()[0]}")
        self._in_netns(service, "iptables", "-A", *rule)
        return SlowLink(self, service, rule, daemon)

    # ------------------------------------------------------------------ reading back
    # ------------------------------------------------------------------ reading back
    def publisher_health(self, service: str = PUBLISHER) -> dict[str, Any] | None:
        """A publisher replica's /health through its published port; None: no answer."""
        try:
            url = self.endpoints().url_of(service)
            answer = httpx.get(f"{url}/health", timeout=PROBE_TIMEOUT_S)
        except httpx.HTTPError:
            return None
        return answer.json() if answer.status_code == 200 else None

    def subscriber_health(self, service: str) -> dict[str, Any] | None:
        """The subscriber's /health: over the container network, or from inside the container
        when it has no address (partitioned); None when it does not answer."""
        try:
            container = self.container(service)
        except ComposeError:
            return None
        if container.status != "running":
            return None
        address = container.address
        if address is not None:
            try:
                answer = httpx.get(
                    f"http://{address}:{SUBSCRIBER_HEALTH_PORT}/health", timeout=PROBE_TIMEOUT_S
                )
            except httpx.HTTPError:
                return None
            return answer.json() if answer.status_code == 200 else None
        probe = (
            "import urllib.request,sys;"
            f"sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:{SUBSCRIBER_HEALTH_PORT}"
            f"/health',timeout={PROBE_TIMEOUT_S}).read().decode())"
        )
        done = _run(["docker", "exec", container.id, "python", "-c", probe], timeout=30)
        if done.returncode != 0:
            return None
        health: dict[str, Any] = json.loads(done.stdout)
        return health

    def processed_offset(self, service: str) -> int | None:
        health = self.subscriber_health(service)
        offset = None if health is None else health.get("processedOffset")
        return None if offset is None else int(offset)

    def rss_bytes(self, service: str) -> int:
        """Resident memory of every process in the service's container (sum of VmRSS)."""
        return cgroup_rss_bytes(self.container(service).pid)


def _dotenv() -> dict[str, str]:
    path = DEPLOY_DIR / ".env"
    return parse_env(path.read_text()) if path.exists() else {}


def _memory_cgroup(pid: int) -> Path:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(",") or controllers == "":
            base = Path("/sys/fs/cgroup/memory") if controllers else Path("/sys/fs/cgroup")
            return base / path.lstrip("/")
    raise ComposeError(f"no memory cgroup for pid {pid}")


def process_rss_bytes(pids: list[int]) -> int:
    """Sum of VmRSS of the processes that still exist."""
    total = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
    return total


def cgroup_rss_bytes(pid: int) -> int:
    """Sum of VmRSS of the processes in ``pid``'s memory cgroup (a container's)."""
    procs = (_memory_cgroup(pid) / "cgroup.procs").read_text().split()
    return process_rss_bytes([int(p) for p in procs])


# Placeholders for the secrets deploy/.env holds, so that `docker compose config` can list the
# images of the default (local) set before compose.sh created the file; they reach nothing.
_PLACEHOLDER_SECRETS = {
    "SCD_COMPOSE_API_TOKEN": "placeholder-token-0123456789",
    "SCD_COMPOSE_S3_ACCESS_KEY": "placeholder",
    "SCD_COMPOSE_S3_SECRET_KEY": "placeholder-secret",
}


def missing_images() -> list[str]:
    """Images of the compose file that are not on the engine (the cluster would build them)."""
    if (DEPLOY_DIR / ".env").exists():
        listed = _run(["bash", str(COMPOSE_SH), "config", "--images"])
    else:
        env = {**_PLACEHOLDER_SECRETS, **os.environ}
        listed = _run(["docker", "compose", "-f", str(COMPOSE_FILE), "config", "--images"], env=env)
    if listed.returncode != 0:
        raise ComposeError(f"docker compose config --images: {listed.stderr.strip()[:300]}")
    return [
        image
        for image in sorted(set(listed.stdout.split()))
        if _run(["docker", "image", "inspect", image], timeout=30).returncode != 0
    ]


SLOW_LINK_SCRIPT = Path(__file__).with_name("slow_link.py")
SLOW_LINK_QUEUE = 7


@dataclass
class SlowLink:
    """A slowed link (``ComposeCluster.slow_link``) until ``clear``."""

    cluster: ComposeCluster
    service: str
    rule: list[str]
    daemon: subprocess.Popen[str]

    def counts(self) -> str:
        """The rule's packet counter, proof that packets went through the queue."""
        return self.cluster._in_netns(self.service, "iptables", "-L", "OUTPUT", "-v", "-n", "-x")

    def clear(self) -> str:
        """Removes the rule, stops the daemon; returns its counts (``passed=N dropped=M``)."""
        self.cluster._in_netns(self.service, "iptables", "-D", *self.rule)
        self.daemon.terminate()
        out, _ = self.daemon.communicate(timeout=10)
        return out.strip()
