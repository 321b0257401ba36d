"""The Kafka broker a benchmark runs against (shared by the benchmark scripts)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parent.parent
# Client port of deploy/kafka.sh when SCD_KAFKA_PORT is not set (deploy/common.sh).
NATIVE_KAFKA_DEFAULT_PORT = 19092


def resolve_bootstrap(flag: str | None, log: Callable[[str], None]) -> str:
    """--bootstrap, else SCD_TEST_KAFKA_BOOTSTRAP, else the native broker of deploy/kafka.sh."""
    bootstrap = flag or os.environ.get("SCD_TEST_KAFKA_BOOTSTRAP")
    if bootstrap:
        return bootstrap
    log("no --bootstrap nor SCD_TEST_KAFKA_BOOTSTRAP: starting deploy/kafka.sh (idempotent)")
    # The script's output goes to our stderr, keeping stdout for the JSON document.
    subprocess.run(
        ["bash", str(REPO_DIR / "deploy" / "kafka.sh"), "start"], check=True, stdout=sys.stderr
    )
    port = os.environ.get("SCD_KAFKA_PORT", str(NATIVE_KAFKA_DEFAULT_PORT))
    return f"127.0.0.1:{port}"
