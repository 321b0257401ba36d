"""The code base stays typed and lint-clean: ruff and mypy strict, as configured in
pyproject.toml, run as part of the test suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["journal", "blobstore", "publisher", "subscriber", "bench", "tests", "proto"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize("command", [["ruff", "check"], ["ruff", "format", "--check"]])
def test_ruff(command: list[str]) -> None:
    result = run(*command, *PACKAGES)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict() -> None:
    result = run("mypy", *PACKAGES)
    assert result.returncode == 0, result.stdout + result.stderr
