"""`scd demo`, the README's main command, on a fresh working directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.services import spark_jars

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_demo_distributes_the_site_and_every_export_equals_it(tmp_path: Path) -> None:
    env = {**os.environ, "SCD_SUBSCRIBER_SPARK_JARS": ",".join(spark_jars())}
    run = subprocess.run(
        [sys.executable, "-m", "journal.cli", "demo", "--workdir", str(tmp_path / "demo")],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    out = run.stdout
    assert "spilled to the blob store" in out
    assert out.count("equals the source") == 2
    assert "IDLE" in out
    # The large binary went to the blob store once, by content address.
    assert list((tmp_path / "demo" / "blobs").rglob("*")), "blob store is empty"
