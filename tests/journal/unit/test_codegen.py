"""The committed protobuf code is what `python proto/generate.py` produces."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "proto" / "generate.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert out, "generator produced nothing"
    for generated in map(Path, out):
        committed = ROOT / generated.relative_to(tmp_path)
        assert committed.exists(), f"{committed} is not committed"
        assert committed.read_text() == generated.read_text(), (
            f"{committed} is stale: run `python proto/generate.py`"
        )
