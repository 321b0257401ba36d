"""What ``scd demo`` prints: a short story on standard output, every log line in a file.

The story fits on one screen: what runs, each distribute (action, paths, offset, size, inline
or spilled), the queues draining (redrawn in place on a terminal), the verification and its
result. Logs of scd, Spark's JVM and Python warnings all write to file descriptor 2, which
``logs_to`` points at the log file; the JVM inherits it when it starts.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from runtime.progress import LiveLines, bar

# Paths of one distribute shown on its line; the rest are counted.
SHOWN_PATHS = 3
QUEUE_BAR_WIDTH = 20


@contextmanager
def logs_to(path: Path) -> Iterator[None]:
    """Send everything written to file descriptor 2 to ``path`` until the block ends."""
    sys.stderr.flush()
    saved = os.dup(2)
    with path.open("ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def size_text(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 1024 / 1024:.1f} MiB"


class Story:
    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout

    def line(self, text: str = "") -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def start(self, workdir: Path, log_path: Path | None, subscribers: int) -> None:
        self.line(
            f"scd demo: a publisher and {subscribers} subscribers in this process "
            "(SQLite journal, local blobs, local Spark)"
        )
        self.line(f"  work directory  {workdir}")
        self.line(
            f"  log file        {log_path}   (-v shows the logs here instead)"
            if log_path is not None
            else "  logs            on standard error (-v)"
        )

    def distributed(self, body: dict[str, Any], answer: dict[str, Any]) -> None:
        shallow, deep = body.get("paths", []), body.get("deepPaths", [])
        paths = [*shallow, *deep]
        shown = " ".join(paths[:SHOWN_PATHS])
        if len(paths) > SHOWN_PATHS:
            shown += f" +{len(paths) - SHOWN_PATHS}"
        if deep:  # with their subtrees
            shown += " (deep)" if not shallow else f" ({len(deep)} deep)"
        how = "spilled to the blob store" if answer["spilled"] else "inline"
        if answer.get("binariesReferenced"):
            how += f", {answer['binariesReferenced']} binary by reference"
        self.line(
            f"  {body['action']:<7} {shown:<34} offset {answer['offset']:>3}  "
            f"{size_text(answer['size']):>9}  {how}"
        )

    def served(self, name: str, files: Sequence[str], problems: Sequence[str]) -> None:
        verdict = "as the source" if not problems else f"{len(problems)} differences"
        self.line(f"  {name:<14} {', '.join(files)}: {verdict}")
        for problem in problems[:5]:
            self.line(f"    {problem}")

    def verified(self, name: str, files: int, size: int, problems: Sequence[str]) -> None:
        verdict = "equals the source" if not problems else f"{len(problems)} differences"
        self.line(f"  {name:<14} {files} files, {size_text(size)}: {verdict}")
        for problem in problems[:5]:
            self.line(f"    {problem}")


class QueueTable:
    """The subscribers' progress through the distributed packages, one line each."""

    def __init__(self, story: Story) -> None:
        self.story = story
        self.lines = LiveLines(story.stream)

    def show(self, rows: Sequence[tuple[str, str, int, int]]) -> None:
        """``rows``: (subscriber, queue state, packages done, packages in all)."""
        self.lines.update(
            [
                f"  {name:<14} {state:<8} [{bar(done, total, QUEUE_BAR_WIDTH)}] "
                f"{done}/{total} packages"
                for name, state, done, total in rows
            ]
        )

    def close(self) -> None:
        self.lines.close()
