"""The FastAPI application of one publisher agent."""

from __future__ import annotations

from fastapi import FastAPI

from publisher.agent import PublisherAgent
from publisher.api import errors
from publisher.api.auth import AuthMiddleware
from publisher.api.body_limit import BodyLimitMiddleware
from publisher.api.forward import ForwardMiddleware
from publisher.api.routes import console, distribute, health, queues, subscribers
from publisher.replicas import ANNOUNCE_EVERY_S

API_VERSION = "1"
# A forwarded request may take the leader's send timeout, its throttle aside; this much more
# covers the hop and the leader's own build of the package.
FORWARD_MARGIN_S = 10.0


def create_app(agent: PublisherAgent) -> FastAPI:
    """The app serves ``agent``; starting and stopping the agent is the caller's business."""
    app = FastAPI(
        title="scd publisher",
        version=API_VERSION,
        description="Distribute content over the journal; inspect subscriber queues.",
    )
    app.state.agent = agent
    # Innermost: a writing request reaches the leader with its token checked and its body
    # bounded here.
    app.add_middleware(
        ForwardMiddleware,
        directory=agent.directory,
        leads=lambda: agent.leadership.is_leader,
        timeout_s=agent.journal_settings.send_timeout_s + FORWARD_MARGIN_S,
        # A dead leader is replaced once its session timed out: twice that, and the new
        # leader's first announcement.
        election_wait_s=2 * agent.settings.leader_session_timeout_s + ANNOUNCE_EVERY_S,
    )
    app.add_middleware(BodyLimitMiddleware, max_bytes=agent.settings.max_request_bytes)
    # Added last, so it runs first: a request without the token is refused before the body
    # limit reads a chunked body, and before anything parses one.
    app.add_middleware(AuthMiddleware, token=agent.settings.api_token)
    errors.install(app)
    for module in (distribute, queues, subscribers, health, console):
        app.include_router(module.router)
    return app
