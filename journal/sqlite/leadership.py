"""Leader election on the embedded SQLite backend: an exclusive ``flock`` on a file beside the
database. The kernel releases the lock when the holder dies, so the next member takes over."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from journal.leadership import Leadership
from runtime.clock import Wait, wait_on


class FileLockLeadership(Leadership):
    def __init__(self, path: Path, retry_s: float, thread_name: str, wait: Wait = wait_on) -> None:
        super().__init__(thread_name)
        self.path = path
        self.retry_s = retry_s
        self._wait = wait

    def _run(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            while not self._stop.is_set():
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    self._wait(self._stop, self.retry_s)
                    continue
                self._set(True)
                self._stop.wait()
        finally:
            self._set(False)
            os.close(fd)  # releases the lock
