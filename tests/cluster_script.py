"""deploy/cluster.sh, the one launcher of the native cluster, driven by the tests.

The script starts, waits for and stops every process; the tests pass its settings through the
environment, call its commands, and read back what it records: pid files, exit statuses
(``run/NAME.exit``), logs and ports. Beyond that they only send signals, to inject faults.

Each cluster gets its own SCD_HOME, cluster directory, ports, topics and buckets, so it neither
sees nor disturbs a developer's cluster; the Spark jars are the shared ones of deploy/.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests import services
from tests.services import KafkaService, S3Service
from tests.waiting import wait_for

CLUSTER_SH = services.DEPLOY_DIR / "cluster.sh"
# `up` starts one Spark JVM per subscriber (plus a master and a worker with
# --spark-standalone): a minute or two on a 2-core machine, several when it is busy.
UP_TIMEOUT_S = 900.0
# `down` waits at most 90 s per subscriber (in parallel) and 45 s for the publisher.
DOWN_TIMEOUT_S = 300.0
STATUS_TIMEOUT_S = 60.0
# After a daemon exits, its Spark JVM follows within seconds.
GROUP_EXIT_TIMEOUT_S = 30.0
# Ports are drawn from this range, away from cluster.sh's defaults (17077, 18080, 18090,
# 18180) and from the native Kafka/S3 ports (19092, 19093, 19000).
PORT_RANGE = (20000, 30000)
# Ports the cluster needs beyond the subscribers': publisher, Spark master and its two UIs.
EXTRA_PORTS = 4


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_block(count: int) -> int:
    """The first of ``count`` consecutive free ports."""
    for _ in range(100):
        base = random.randrange(PORT_RANGE[0], PORT_RANGE[1] - count)
        if all(_free(base + i) for i in range(count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports in {PORT_RANGE}")


def group_members(pgids: set[int]) -> list[str]:
    """Live (non-zombie) processes whose process group is one of ``pgids``."""
    found: list[str] = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # exited meanwhile
        fields = text.rsplit(")", 1)[1].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp in pgids and state not in ("Z", "X"):
            found.append(f"{stat.parent.name} ({text.split(' ', 2)[1]}, state {state})")
    return found


@dataclass(frozen=True)
class Process:
    """One process of the cluster (publisher, subscriber-N, spark-*), seen through its files."""

    name: str
    run_dir: Path
    log_path: Path

    @property
    def pid(self) -> int:
        return int((self.run_dir / f"{self.name}.pid").read_text())

    @property
    def exit_status(self) -> int | None:
        """As the shell reports it (128 + N: killed by signal N); None while it runs."""
        try:
            return int((self.run_dir / f"{self.name}.exit").read_text())
        except (OSError, ValueError):
            return None

    @property
    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except (OSError, ValueError):
            return False
        return self.exit_status is None

    def signal(self, signum: signal.Signals) -> None:
        """Signal the daemon process itself (SIGTERM: clean shutdown)."""
        os.kill(self.pid, signum)

    def kill(self) -> None:
        """SIGKILL the daemon's whole process group: the process and its Spark JVM at once."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)

    def wait(self, timeout_s: float) -> int:
        """Wait for the daemon to exit and its process group to be gone; its exit status."""
        try:
            wait_for(lambda: self.exit_status is not None, timeout_s, f"{self.name} to exit")
        except AssertionError:
            raise AssertionError(
                f"{self.name} (pid {self.pid}) still runs {timeout_s:.0f} s after the signal\n"
                + self.log_tail()
            ) from None
        status = self.exit_status
        assert status is not None
        deadline = time.monotonic() + GROUP_EXIT_TIMEOUT_S
        while group_members({self.pid}) and time.monotonic() < deadline:
            time.sleep(0.2)
        if group_members({self.pid}):  # a child outlived its parent: do not leak it
            self.kill()
        return status

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


@dataclass
class ClusterScript:
    env: dict[str, str]
    home: Path  # the working directory of the script and of every process it starts
    subscribers: int
    publisher_port: int
    subscriber_port: int

    @classmethod
    def configure(
        cls,
        home: Path,
        name: str,
        kafka: KafkaService,
        s3: S3Service,
        subscribers: int,
        settings: dict[str, str],
    ) -> ClusterScript:
        """A cluster of its own on the given servers: ports, directories, topics and buckets
        named after ``name``; ``settings`` add to (or override) the environment."""
        base = free_port_block(subscribers + EXTRA_PORTS)
        publisher_port, spark_port, spark_ui_port = base, base + 1, base + 2  # UIs: +2, +3
        subscriber_port = base + EXTRA_PORTS
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCD_")}
        env.update(
            {
                **{
                    f"SCD_JOURNAL_TOPICS__{kind.upper()}": topic
                    for kind, topic in services.unique_topics(name).items()
                },
                "SCD_HOME": str(home / "home"),
                # The daemons run from the tests' own virtualenv (.venv or SCD_VENV).
                "SCD_VENV": sys.prefix,
                "SCD_CLUSTER_DIR": str(home / "cluster"),
                "SCD_CLUSTER_LOG_DIR": str(home / "logs"),
                "SCD_CLUSTER_SUBSCRIBERS": str(subscribers),
                "SCD_CLUSTER_PUBLISHER_PORT": str(publisher_port),
                "SCD_CLUSTER_SUBSCRIBER_PORT": str(subscriber_port),
                "SCD_CLUSTER_SPARK_PORT": str(spark_port),
                "SCD_CLUSTER_SPARK_UI_PORT": str(spark_ui_port),
                "SCD_CLUSTER_CONTENT_BUCKET": f"{name}-content",
                "SCD_CLUSTER_KAFKA_BOOTSTRAP": kafka.bootstrap,
                "SCD_CLUSTER_S3_ENDPOINT": s3.endpoint_url,
                "SCD_S3_ACCESS_KEY": s3.access_key,
                "SCD_S3_SECRET_KEY": s3.secret_key,
                "SCD_S3_REGION": s3.region,
                "SCD_BLOB_BUCKET": f"{name}-blobs",
                "SCD_PUBLISHER_LEADER_TOPIC": f"{name}.leader",
                # The jars deploy/ already fetched (the fresh SCD_HOME has none).
                "SCD_SUBSCRIBER_SPARK_JARS": ",".join(services.spark_jars(s3a=True)),
                # The run's class archive (tests/conftest.py); "": none yet, start without.
                "SCD_SUBSCRIBER_SPARK_CLASS_ARCHIVE": str(services.spark_class_archive() or ""),
                **settings,
            }
        )
        return cls(env, home, subscribers, publisher_port, subscriber_port)

    @property
    def directory(self) -> Path:
        return Path(self.env["SCD_CLUSTER_DIR"])

    @property
    def publisher_url(self) -> str:
        return f"http://127.0.0.1:{self.publisher_port}"

    def subscriber_url(self, index: int) -> str:
        """Health endpoint base of subscriber-``index`` (from 1)."""
        return f"http://127.0.0.1:{self.subscriber_port + index - 1}"

    def process(self, name: str) -> Process:
        return Process(
            name, self.directory / "run", Path(self.env["SCD_CLUSTER_LOG_DIR"]) / f"{name}.log"
        )

    def pids(self) -> dict[str, int]:
        return {
            pidfile.stem: int(pidfile.read_text())
            for pidfile in (self.directory / "run").glob("*.pid")
        }

    def start(self, *args: str) -> subprocess.Popen[str]:
        """``cluster.sh ARGS`` in the background; finish() collects it."""
        return subprocess.Popen(
            ["bash", str(CLUSTER_SH), *args],
            env=self.env,
            cwd=self.home,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(
        self, *args: str, timeout: float = STATUS_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        return self.finish(self.start(*args), timeout)

    @staticmethod
    def finish(
        command: subprocess.Popen[str], timeout: float = UP_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        try:
            stdout, stderr = command.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            command.kill()
            stdout, stderr = command.communicate()
            raise AssertionError(
                f"{command.args!r} still ran after {timeout:.0f} s\n{stdout}{stderr}"
            ) from None
        return subprocess.CompletedProcess(command.args, command.returncode, stdout, stderr)

    def up(self, *args: str) -> None:
        """``cluster.sh up ARGS``: returns once every process it starts answers."""
        done = self.run("up", *args, timeout=UP_TIMEOUT_S)
        assert done.returncode == 0, done.stdout + done.stderr

    def down(self, *names: str) -> subprocess.CompletedProcess[str]:
        return self.run("down", *names, timeout=DOWN_TIMEOUT_S)
