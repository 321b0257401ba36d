"""The subscriber daemon's small HTTP endpoint: liveness, readiness and Prometheus metrics.

* ``GET /health``: 200 with the agent name, instance id, processed offset, state, writer
  role and ``holdsPosition`` while the process serves (liveness);
* ``GET /ready``: 200 once the subscriber is ready (subscriber.readiness), else 503; both
  with the reason, so an operator sees what it waits for;

``holdsPosition`` true means every package distributed from now on reaches this subscriber:
where a new store starts (``startOffset``) was fixed when the process started, and a store
that holds an offset resumes from it. Launchers (deploy/cluster.sh, compose healthchecks) wait
for it before they call the cluster up; it turns true before the store has opened.
* ``GET /metrics``: Prometheus text exposition;
* the read API, when given one (subscriber.reads.api, docs/read-api.md): ``/content/...`` and
  ``/binaries/...``, on threads of its own.

The endpoint knows nothing of the agents: it is given three callables (a daemon's, over all
its agents, come from subscriber.fleet.view). It runs uvicorn in a
background thread; uvicorn installs signal handlers only in the main thread, so the daemon
keeps its own SIGTERM handling (see runtime/http_server.py).
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from runtime.http_server import DEFAULT_HOST, AppServer
from subscriber.reads.api import ReadApi

# The kernel's send buffer of a connection (it doubles the figure): what a reader that stops
# reading a binary costs beyond one chunk, instead of the megabytes autotuning grows on
# loopback. Still a full link for one reader: 512 KiB per round trip, 50 MB/s at 10 ms.
SEND_BUFFER_BYTES = 256 * 1024


class CanaryWait(BaseModel):
    """The package a staged subscriber waits with (subscriber.bookkeeper.staging)."""

    offset: int
    pending: list[str]  # canaries that did not report it yet (WAITING_FOR_CANARY)
    failed: list[str]  # canaries that failed it for good (CANARY_FAILED: held)


class Health(BaseModel):
    """Liveness answer (camelCase JSON like the publisher's API)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    agent: str
    instance_id: str | None  # None until the content store is open
    processed_offset: int | None  # None: nothing processed yet
    state: str  # e.g. STARTING, IDLE, RUNNING, BLOCKED, BEHIND_LOG, SEQUENCE_GAP,
    # PAUSED, WAITING_FOR_CANARY, CANARY_FAILED, STANDBY, STOPPING
    # "active (writer epoch N)", or "standby: store X is written by Y (epoch N)"
    role: str = "active"
    # Every package distributed from now on will be imported (see the module docstring).
    holds_position: bool = False
    start_offset: int | None = None  # where a new store starts (reset, fixed at process start)
    canary_wait: CanaryWait | None = None  # a staged subscriber's wait, while it waits
    # Seconds from the process's start to each start milestone (subscriber.start_report).
    start: dict[str, float] = {}


class ReadyAnswer(BaseModel):
    ready: bool
    reason: str


HealthSource = Callable[[], Health]
ReadinessCheck = Callable[[], tuple[bool, str]]  # subscriber.readiness.Readiness.check
MetricsSource = Callable[[], bytes]  # subscriber.metrics.SubscriberMetrics.render


def create_app(
    health: HealthSource,
    ready: ReadinessCheck,
    metrics: MetricsSource,
    reads: ReadApi | None = None,
) -> FastAPI:
    app = FastAPI(title="scd subscriber", docs_url=None, redoc_url=None, openapi_url=None)
    if reads is not None:
        app.include_router(reads.router())

    @app.get("/health", response_model=Health)
    def get_health() -> JSONResponse:
        # The model's own fields, a subclass's included (a daemon's per-agent detail,
        # subscriber.fleet.view): a response_model would drop those.
        return JSONResponse(health().model_dump(mode="json", by_alias=True))

    @app.get("/ready", responses={503: {"model": ReadyAnswer}})
    def get_ready() -> JSONResponse:
        is_ready, reason = ready()
        body = ReadyAnswer(ready=is_ready, reason=reason).model_dump()
        return JSONResponse(body, status_code=200 if is_ready else 503)

    @app.get("/metrics", response_class=Response)
    def get_metrics() -> Response:
        return Response(metrics(), media_type=CONTENT_TYPE_LATEST)

    return app


class HealthServer(AppServer):
    """Serves create_app(...) on ``host:port`` (port 0 = any free port) in a thread; a start
    that fails (a port in use) raises runtime.http_server.ServerError."""

    def __init__(
        self,
        health: HealthSource,
        ready: ReadinessCheck,
        metrics: MetricsSource,
        *,
        reads: ReadApi | None = None,
        host: str = DEFAULT_HOST,
        port: int = 0,
    ) -> None:
        super().__init__(
            create_app(health, ready, metrics, reads),
            host=host,
            port=port,
            name="health endpoint",
            send_buffer_bytes=SEND_BUFFER_BYTES,
        )
