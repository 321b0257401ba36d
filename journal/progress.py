"""A minimal progress bar for long CLI operations (export, bulk distribute).

Draws on stderr only when it is a terminal, so piped output and logs stay clean.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

# Redraw at most this often: a terminal does not need more, and it keeps the cost negligible.
REDRAW_INTERVAL_S = 0.1
BAR_WIDTH = 30


class ProgressBar:
    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty()
        self._last = 0.0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done < total and now - self._last < REDRAW_INTERVAL_S:
            return
        self._last = now
        filled = BAR_WIDTH * done // total if total else BAR_WIDTH
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        self.stream.write(f"\r{self.label} [{bar}] {done}/{total}")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()
