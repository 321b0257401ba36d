"""Request dependencies: the agent, and the bearer-token check of mutating endpoints.

``Authorized`` is the one declaration that an endpoint needs the token: it shows the bearer
scheme in the OpenAPI description, and the auth middleware (publisher/api/auth.py) finds the
routes declaring it and refuses a request without the token before its body is read.
``token_accepted`` is the one decision on a token; both use it.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import SecretStr

from publisher.agent import PublisherAgent

_bearer = HTTPBearer(auto_error=False, description="The publisher's API token")

UNAUTHORIZED_DETAIL = "missing or invalid API token (send 'Authorization: Bearer <token>')"
UNAUTHORIZED_HEADERS = {"WWW-Authenticate": "Bearer"}


def get_agent(request: Request) -> PublisherAgent:
    agent: PublisherAgent = request.app.state.agent
    return agent


AgentDep = Annotated[PublisherAgent, Depends(get_agent)]


def authorization_header(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The first Authorization header of raw ASGI headers (names are lower case in ASGI)."""
    for name, value in headers:
        if name == b"authorization":
            return value
    return None


def token_accepted(token: SecretStr | None, authorization: bytes | None) -> bool:
    """Whether an ``Authorization`` header value carries the API token. No token configured
    (dev mode; settings refuse it otherwise): every request is accepted."""
    if token is None:
        return True
    if authorization is None:
        return False
    scheme, _, given = authorization.strip().partition(b" ")
    # Constant time whatever the given token, so its bytes cannot be guessed one by one.
    matches = secrets.compare_digest(given.strip(), token.get_secret_value().encode())
    return scheme.lower() == b"bearer" and matches


def require_token(
    request: Request,
    agent: AgentDep,
    # Unused here: declares the bearer scheme in the OpenAPI description.
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    # The auth middleware already refused a request without the token before reading its
    # body; checked again here so that an endpoint is never open should the middleware miss
    # a route.
    if not token_accepted(agent.settings.api_token, authorization_header(request.scope["headers"])):
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail=UNAUTHORIZED_DETAIL,
            headers=UNAUTHORIZED_HEADERS,
        )


Authorized = Depends(require_token)
