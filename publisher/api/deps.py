"""Request dependencies: the agent, and the bearer-token check of mutating endpoints."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from publisher.agent import PublisherAgent

_bearer = HTTPBearer(auto_error=False, description="The publisher's API token")


def get_agent(request: Request) -> PublisherAgent:
    agent: PublisherAgent = request.app.state.agent
    return agent


AgentDep = Annotated[PublisherAgent, Depends(get_agent)]


def require_token(
    agent: AgentDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    token = agent.settings.api_token
    if token is None:
        return  # dev mode without a token (settings refuse this outside dev mode)
    given = credentials.credentials if credentials is not None else None
    if given is None or not secrets.compare_digest(
        given.encode("utf-8", "replace"), token.get_secret_value().encode()
    ):
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail="missing or invalid API token (send 'Authorization: Bearer <token>')",
            headers={"WWW-Authenticate": "Bearer"},
        )


Authorized = Depends(require_token)
