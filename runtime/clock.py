"""Wall-clock time in milliseconds since the epoch: the unit of every timestamp on the wire and in
the store."""

import time


def now_ms() -> int:
    return int(time.time() * 1000)
