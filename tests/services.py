"""The one fixture interface to real infrastructure used by the integration tests.

Each service comes from (in order): environment variables, testcontainers when a Docker engine
answers, else the native processes started by the deploy/ scripts. Tests see only these
classes, never how the service was obtained.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class KafkaService:
    """A reachable Kafka broker."""

    bootstrap: str
    origin: str  # "env", "testcontainers" or "native"
    _stop: Callable[[], None] | None = field(default=None, repr=False)
    _start: Callable[[], None] | None = field(default=None, repr=False)

    @property
    def restartable(self) -> bool:
        """True when tests may stop and start the broker (fault-injection tests need it)."""
        return self._stop is not None and self._start is not None

    def stop(self) -> None:
        assert self._stop is not None, "this Kafka service cannot be stopped by tests"
        self._stop()

    def start(self) -> None:
        """Start again after stop(), on the same address and data (returns when ready)."""
        assert self._start is not None, "this Kafka service cannot be started by tests"
        self._start()


@dataclass
class S3Service:
    """A reachable S3-compatible server."""

    endpoint_url: str
    access_key: str
    secret_key: str
    region: str
    origin: str
    _stop: Callable[[], None] | None = field(default=None, repr=False)
    _start: Callable[[], None] | None = field(default=None, repr=False)

    @property
    def restartable(self) -> bool:
        return self._stop is not None and self._start is not None

    def stop(self) -> None:
        assert self._stop is not None, "this S3 service cannot be stopped by tests"
        self._stop()

    def start(self) -> None:
        assert self._start is not None, "this S3 service cannot be started by tests"
        self._start()
