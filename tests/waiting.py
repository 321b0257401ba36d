"""Waiting in tests for a condition that other threads or processes make true."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal, TypeVar

T = TypeVar("T")

# The first checks come quickly (an in-process condition often holds within milliseconds);
# the pause then doubles up to half a second, so that a long wait on HTTP endpoints or Spark
# does not load a 2-core machine with checks.
FIRST_PAUSE_S = 0.01
MAX_PAUSE_S = 0.5


def wait_for(
    condition: Callable[[], T | Literal[False] | None], timeout_s: float = 10.0, what: str = ""
) -> T:
    """Check ``condition`` until it returns a truthy value, and return that value; fail
    naming ``what`` (or the condition) after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    pause = FIRST_PAUSE_S
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout_s:.0f} s waiting for {what or condition}"
            )
        time.sleep(pause)
        pause = min(pause * 2, MAX_PAUSE_S)
