"""`bash deploy/demo.sh` (the README's main command: `scd demo`) on a fresh working directory."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_demo_distributes_the_site_and_every_export_equals_it(tmp_path: Path) -> None:
    run = subprocess.run(
        ["bash", str(ROOT / "deploy" / "demo.sh"), "--workdir", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    out = run.stdout
    assert "spilled to the blob store" in out
    assert out.count("equals the source") == 2
    assert "IDLE" in out
    # The large binary went to the blob store once, by content address.
    assert list((tmp_path / "demo" / "blobs").rglob("*")), "blob store is empty"
