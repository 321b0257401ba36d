"""Wall-clock time in milliseconds since the epoch: the unit of every timestamp on the wire and in
the store."""

import threading
import time
from collections.abc import Callable


def now_ms() -> int:
    return int(time.time() * 1000)


def wait_on(event: threading.Event, timeout_s: float) -> bool:
    """Wait until ``event`` is set or ``timeout_s`` passed; True when it was set. The waits of a
    retry loop go through a parameter of this type, so that a test can see each retry happen
    instead of sleeping and hoping it did."""
    return event.wait(timeout_s)


Wait = Callable[[threading.Event, float], bool]
