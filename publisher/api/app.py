"""The FastAPI application of one publisher agent."""

from __future__ import annotations

from fastapi import FastAPI

from publisher.agent import PublisherAgent
from publisher.api import errors
from publisher.api.auth import AuthMiddleware
from publisher.api.body_limit import BodyLimitMiddleware
from publisher.api.routes import console, distribute, health, queues, subscribers

API_VERSION = "1"


def create_app(agent: PublisherAgent) -> FastAPI:
    """The app serves ``agent``; starting and stopping the agent is the caller's business."""
    app = FastAPI(
        title="scd publisher",
        version=API_VERSION,
        description="Distribute content over the journal; inspect subscriber queues.",
    )
    app.state.agent = agent
    app.add_middleware(BodyLimitMiddleware, max_bytes=agent.settings.max_request_bytes)
    # Added last, so it runs first: a request without the token is refused before the body
    # limit reads a chunked body, and before anything parses one.
    app.add_middleware(AuthMiddleware, token=agent.settings.api_token)
    errors.install(app)
    for module in (distribute, queues, subscribers, health, console):
        app.include_router(module.router)
    return app
