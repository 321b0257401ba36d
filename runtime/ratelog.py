"""Rate-limited logging for events that can come by the thousand (a flood of forged records or
subscriber announcements): one line per interval, saying how many similar ones were not logged,
so that a hostile writer can fill neither the disk nor the log pipeline."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

# One line per category every 10 s: enough to notice and diagnose, never a flood.
DEFAULT_INTERVAL_S = 10.0


class RateLimitedLog:
    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self.clock = clock
        self._lock = threading.Lock()
        self._next: float | None = None
        self._suppressed = 0

    def log(
        self, level: int, msg: str, *args: object, exc_info: BaseException | None = None
    ) -> bool:
        """Log unless a line was logged less than an interval ago; returns whether it logged."""
        with self._lock:
            now = self.clock()
            if self._next is not None and now < self._next:
                self._suppressed += 1
                return False
            suppressed, self._suppressed = self._suppressed, 0
            self._next = now + self.interval_s
        if suppressed:
            msg += " (and %d more like it in the last %.0f s, not logged)"
            args = (*args, suppressed, self.interval_s)
        self.logger.log(level, msg, *args, exc_info=exc_info)
        return True
