"""What the benches take from this machine: the Spark jars deploy/ fetched, a free port."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parent.parent


def spark_jars(*, kafka: bool = False) -> list[str]:
    """Delta's jars (and with ``kafka`` Spark's Kafka source), fetched by deploy/spark-jars.sh
    (instant once fetched)."""
    command = ["bash", str(REPO_DIR / "deploy" / "spark-jars.sh")]
    if kafka:
        command.append("--kafka")
    lists = subprocess.run(command, check=True, capture_output=True, text=True).stdout.split()
    return [jar for name in lists for jar in Path(name).read_text().split()]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
