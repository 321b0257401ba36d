"""Liveness, readiness, Prometheus metrics and the on-demand blob cleanup."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from publisher.api.deps import AgentDep, Authorized
from publisher.api.models import ApiModel, CleanupResponse, HealthModel

router = APIRouter(tags=["operations"])


@router.get("/health")
def health() -> HealthModel:
    """Liveness: the process answers."""
    return HealthModel(status="ok")


@router.get(
    "/ready",
    responses={
        503: {"description": "Not started, a background thread down, or journal unreachable"}
    },
)
def ready(agent: AgentDep) -> HealthModel:
    """Readiness: the agent runs, none of its background threads is down, the journal answers."""
    is_ready, reason = agent.readiness()
    if not is_ready:
        body = {"status": "not ready", "reason": reason}
        return JSONResponse(body, status_code=503)  # type: ignore[return-value]
    return HealthModel(status="ready")


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
def metrics(agent: AgentDep) -> Response:
    """Prometheus metrics (text format)."""
    agent.update_metrics()
    return Response(agent.metrics.render(), media_type=CONTENT_TYPE_LATEST)


@router.post(
    "/cleanup",
    dependencies=[Authorized],
    responses={401: {"description": "Missing or invalid API token"}},
    response_model=CleanupResponse,
)
def cleanup(agent: AgentDep) -> ApiModel:
    """Run the package blob cleanup now (normally the leader runs it every 12 h)."""
    return CleanupResponse.of(agent.run_cleanup())
