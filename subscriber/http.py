"""The subscriber daemon's small HTTP endpoint: liveness, readiness and Prometheus metrics.

* ``GET /health``: 200 with the agent name, instance id, processed offset and state while the
  process serves (liveness);
* ``GET /ready``: 200 once the subscriber is ready (subscriber.readiness), else 503; both
  with the reason, so an operator sees what it waits for;
* ``GET /metrics``: Prometheus text exposition.

The endpoint knows nothing of the agent: it is given three callables. It runs uvicorn in a
background thread; uvicorn installs signal handlers only in the main thread, so the daemon
keeps its own SIGTERM handling. The socket is bound before the thread starts, so a port in
use fails ``start()`` at once and port 0 (any free port) is known right away.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType

import uvicorn
from fastapi import FastAPI, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from journal.errors import ScdError

log = logging.getLogger(__name__)

# Loopback by default: health and metrics are for the local kubelet / Prometheus agent, and
# an endpoint without authentication should not be reachable from the network by accident.
DEFAULT_HOST = "127.0.0.1"
# Probes and scrapes come a few at a time; a short accept queue is plenty.
LISTEN_BACKLOG = 64
# uvicorn starts in milliseconds; 10 s leaves room for a loaded 2-core machine.
STARTUP_TIMEOUT_S = 10.0
# How often start() looks whether the server thread is up.
STARTUP_POLL_S = 0.01
# Requests in flight get this long to finish on stop(); probes answer in milliseconds.
SHUTDOWN_GRACE_S = 5.0


class HealthServerError(ScdError):
    """The health endpoint could not start (typically: the port is taken)."""


class Health(BaseModel):
    """Liveness answer (camelCase JSON like the publisher's API)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    agent: str
    instance_id: str | None  # None until the content store is open
    processed_offset: int | None  # None: nothing processed yet
    state: str  # e.g. STARTING, IDLE, RUNNING, BLOCKED, STOPPING


class ReadyAnswer(BaseModel):
    ready: bool
    reason: str


HealthSource = Callable[[], Health]
ReadinessCheck = Callable[[], tuple[bool, str]]  # subscriber.readiness.Readiness.check
MetricsSource = Callable[[], bytes]  # subscriber.metrics.SubscriberMetrics.render


def create_app(health: HealthSource, ready: ReadinessCheck, metrics: MetricsSource) -> FastAPI:
    app = FastAPI(title="scd subscriber", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/health")
    def get_health() -> Health:
        return health()

    @app.get("/ready", responses={503: {"model": ReadyAnswer}})
    def get_ready() -> JSONResponse:
        is_ready, reason = ready()
        body = ReadyAnswer(ready=is_ready, reason=reason).model_dump()
        return JSONResponse(body, status_code=200 if is_ready else 503)

    @app.get("/metrics", response_class=Response)
    def get_metrics() -> Response:
        return Response(metrics(), media_type=CONTENT_TYPE_LATEST)

    return app


class HealthServer:
    """Serves create_app(...) on ``host:port`` (port 0 = any free port) in a thread."""

    def __init__(
        self,
        health: HealthSource,
        ready: ReadinessCheck,
        metrics: MetricsSource,
        *,
        host: str = DEFAULT_HOST,
        port: int = 0,
    ) -> None:
        self.host = host
        self._requested_port = port
        self._port: int | None = None
        config = uvicorn.Config(
            create_app(health, ready, metrics),
            log_config=None,  # the daemon configures logging, not this library
            access_log=False,  # probes every few seconds would drown the log
            lifespan="off",
            timeout_graceful_shutdown=int(SHUTDOWN_GRACE_S),
        )
        self._server = uvicorn.Server(config)
        self._socket: socket.socket | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (after start())."""
        if self._port is None:
            raise RuntimeError("health server not started")
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self._requested_port))
            sock.listen(LISTEN_BACKLOG)
        except OSError as exc:
            sock.close()
            raise HealthServerError(
                f"health endpoint cannot listen on {self.host}:{self._requested_port}: {exc}"
            ) from exc
        self._socket = sock
        self._port = int(sock.getsockname()[1])
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [sock]},
            name=f"scd-health-{self._port}",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise HealthServerError(f"health endpoint on {self.url} did not start")
            time.sleep(STARTUP_POLL_S)
        log.info("health endpoint listening on %s", self.url)

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(SHUTDOWN_GRACE_S + STARTUP_TIMEOUT_S)
            if self._thread.is_alive():
                log.warning("health endpoint on %s did not stop in time", self.url)
            self._thread = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def __enter__(self) -> HealthServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
