"""Progress displays for long CLI operations: a bar (export, bulk distribute) and a block of
lines redrawn in place (the demo's queues draining).

Both draw live only on a terminal, so piped output and logs stay clean: a bar stays silent,
a block is printed once, in its final state.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import TextIO

# Redraw at most this often: a terminal does not need more, and it keeps the cost negligible.
REDRAW_INTERVAL_S = 0.1
BAR_WIDTH = 30
# ANSI: move the cursor to the start of the line n lines up; erase the whole line.
_UP = "\x1b[{}F"
_ERASE = "\x1b[2K"


def bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    filled = width * done // total if total else width
    return "#" * filled + "-" * (width - filled)


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
        self.stream.write(f"\r{self.label} [{bar(done, total)}] {done}/{total}")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


class LiveLines:
    """A block of lines shown in place: each ``update`` redraws it on a terminal; elsewhere
    ``close`` prints the last version once (a log gets the outcome, not every step)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.live = self.stream.isatty()
        self._lines: list[str] = []
        self._shown = 0

    def update(self, lines: Sequence[str]) -> None:
        self._lines = list(lines)
        if self.live:
            self._draw()

    def close(self) -> None:
        if not self.live:
            self._shown = 0
        self._draw()

    def _draw(self) -> None:
        erase = _ERASE if self.live else ""
        out = [_UP.format(self._shown)] if self._shown else []
        out += [f"{erase}{line}\n" for line in self._lines]
        # A shorter block leaves the rest of the old one erased, not stale.
        out += [f"{erase}\n"] * max(0, self._shown - len(self._lines))
        self.stream.write("".join(out))
        self.stream.flush()
        self._shown = max(self._shown, len(self._lines))
