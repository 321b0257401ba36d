"""The compat tests' Java side: each fixture is a Maven project, built once per module and run
on the JVM; without java and mvn its tests are skipped."""

from __future__ import annotations

import shutil
import subprocess

import pytest

BUILD_TIMEOUT_S = 600


def needs_jvm(whose: str) -> pytest.MarkDecorator:
    """The mark of a module whose tests run ``whose`` classes."""
    return pytest.mark.skipif(
        shutil.which("java") is None or shutil.which("mvn") is None,
        reason=f"java and mvn not installed: {whose} classes run in a JVM that Maven builds",
    )


def build_classpath(command: list[str]) -> str:
    """The classpath a fixture's build script prints."""
    built = subprocess.run(
        command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False
    )
    assert built.returncode == 0, built.stderr
    return built.stdout.strip()
