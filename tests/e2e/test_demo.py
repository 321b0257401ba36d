"""`bash deploy/demo.sh` (the README's main command: `scd demo`) on a fresh working directory."""

from __future__ import annotations

import re
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
    log = tmp_path / "demo" / "demo.log"
    assert run.returncode == 0, run.stdout + run.stderr[-3000:] + log.read_text()[-3000:]
    out = run.stdout
    assert "spilled to the blob store" in out
    assert "1 binary by reference" in out
    assert out.count("equals the source") == 2
    # Each subscriber serves a page and the binary stored by reference over its read API.
    assert out.count("index.html, images/hero.bin: as the source") == 2
    assert re.search(r"read API +http://127\.0\.0\.1:\d+/agents/", out)
    assert out.count("IDLE") == 2
    assert out.count("6/6 packages") == 2
    assert "result: OK" in out
    assert f"log file: {log}" in out
    assert re.search(r"console +http://127\.0\.0\.1:\d+/console", out)
    # A story that fits on one screen; the logs of scd and Spark went to the file.
    assert len(out.splitlines()) <= 30, out
    assert not re.search(r" (INFO|WARN|WARNING|ERROR) ", out + run.stderr), run.stderr
    assert " INFO " in log.read_text()
    assert "Editable installation" not in run.stderr
    # The large binary went to the blob store once, by content address.
    assert list((tmp_path / "demo" / "blobs").rglob("*")), "blob store is empty"
