"""Authentication before work: a request to an endpoint that needs the API token and does not
carry it is refused (401) from its headers alone, before anything reads its body.

FastAPI parses the body before it runs an endpoint's dependencies, so the ``Authorized``
dependency alone answers 401 only after a 24 MB JSON body was read and parsed (the publisher
grew by 580 MiB for one such request). This middleware runs first: it finds the route the
request is for, and if that route declares ``Authorized`` (publisher/api/deps.py, the single
declaration: no second list of paths), checks the token with the same ``token_accepted`` and
answers 401 without calling ``receive()`` and with ``Connection: close``, so the server stops
reading what the client still sends.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import RouteContext, iter_route_contexts
from pydantic import SecretStr
from starlette.routing import Match

from publisher.api.body_limit import ASGIApp, Receive, Scope, Send, refuse
from publisher.api.deps import (
    UNAUTHORIZED_DETAIL,
    UNAUTHORIZED_HEADERS,
    authorization_header,
    require_token,
    token_accepted,
)


def declares_token(dependant: Dependant) -> bool:
    """Whether ``require_token`` is among the dependencies, at any depth."""
    return any(d.call is require_token or declares_token(d) for d in dependant.dependencies)


def needs_token(route: RouteContext) -> bool:
    # The effective route's dependant: the route's own dependencies and those of the routers
    # it was included through. Non-FastAPI routes (the docs pages) have none.
    dependant = getattr(route, "dependant", None)
    return isinstance(dependant, Dependant) and declares_token(dependant)


def routes_of(app: FastAPI) -> list[RouteContext]:
    """Every route, included routers' routes in place, in the order the router tries them."""
    return list(iter_route_contexts(app.routes))


class AuthMiddleware:
    def __init__(self, app: ASGIApp, token: SecretStr | None) -> None:
        self.app = app
        self.token = token
        # (route, needs the token) in the router's order, derived from the app's routes.
        self._routes: list[tuple[RouteContext, bool]] = []
        self._derived_from = -1

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and self.token is not None
            and self._needs_token(scope)
            and not token_accepted(self.token, authorization_header(scope["headers"]))
        ):
            await refuse(send, 401, UNAUTHORIZED_DETAIL, UNAUTHORIZED_HEADERS)
            return
        await self.app(scope, receive, send)

    def _needs_token(self, scope: Scope) -> bool:
        """Whether the route the router will pick for this request needs the token: its first
        full match (path and method), as the router dispatches."""
        app: FastAPI = scope["app"]
        if self._derived_from != len(app.routes):  # once, and again if routers are added
            self._routes = [(route, needs_token(route)) for route in routes_of(app)]
            self._derived_from = len(app.routes)
        for route, protected in self._routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return protected
        return False
