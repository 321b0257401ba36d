"""The subscriber daemon as the crash test runs it: ``python tests/subscriber/crash_child.py``.

Same as ``scd subscriber`` (settings from ``SCD_SUBSCRIBER_*``), plus one fault mode so
the crash test can prove it catches a broken store: with ``SCD_TEST_BROKEN_COMMIT=1`` every
import commit is split in two Delta commits, the batch's content (and statuses) first and its
offset row second, with a pause between them. A kill in that pause leaves new content with the
old offset, and the restarted subscriber imports the batch again.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

# Run as a script: make the repository importable whatever the working directory.
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from scd.cli import main
from subscriber.store.changes import ChangeSet
from subscriber.store.delta import DeltaStore
from subscriber.store.rows import KIND_OFFSET

log = logging.getLogger("crash_child")

BROKEN_ENV = "SCD_TEST_BROKEN_COMMIT"
# Pause between the content commit and the offset commit in the broken mode: long enough
# for the test to kill the process inside it after reading the log line that opens it.
BROKEN_GAP_S = 1.5
# Log lines the crash test reads (the pause opens after the first, closes with the second).
CONTENT_COMMITTED = "crash-test broken commit: content of offsets %d..%d committed"
OFFSET_COMMITTED = "crash-test broken commit: offset row %d committed"


def install_broken_commit() -> None:
    """Split DeltaStore.commit: the product's own write minus the offset row, then the row."""
    original = DeltaStore.commit

    def broken_commit(self: DeltaStore, changes: ChangeSet) -> None:
        write = self._write
        held: list[tuple[Any, ...]] = []

        def write_content(rows: list[tuple[Any, ...]], **kw: Any) -> None:
            held.extend(r for r in rows if r[0] == KIND_OFFSET)
            write([r for r in rows if r[0] != KIND_OFFSET], **kw)

        self._write = write_content  # type: ignore[method-assign]
        try:
            original(self, changes)
        finally:
            del self._write
        log.info(CONTENT_COMMITTED, changes.first_offset, changes.last_offset)
        time.sleep(BROKEN_GAP_S)
        self._write(held, user_metadata={"offset_row": changes.last_offset})
        log.info(OFFSET_COMMITTED, changes.last_offset)

    DeltaStore.commit = broken_commit  # type: ignore[method-assign]


if __name__ == "__main__":
    if os.environ.get(BROKEN_ENV) == "1":
        install_broken_commit()
    sys.exit(main(["subscriber"]))
