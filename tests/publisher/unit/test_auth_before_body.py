"""Authentication before work: a request to a mutating endpoint without the API token gets its
401 from the headers alone; the body is never read (not by the app, not by the server)."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import MutableMapping
from typing import Any

import pytest
from fastapi import FastAPI

from publisher.agent import PublisherAgent
from publisher.api import create_app
from publisher.api.auth import needs_token, routes_of
from runtime.http_server import AppServer
from tests.publisher.conftest import TOKEN, AgentFactory


def protected_routes(app: FastAPI) -> list[tuple[str, set[str]]]:
    """(path, methods) of every route that needs the token: what the middleware protects."""
    return [(r.path or "", set(r.methods or ())) for r in routes_of(app) if needs_token(r)]


# The body size of the issue: 24 MB of JSON, declared and never sent.
DECLARED_BYTES = 24 * 1024 * 1024
MUTATING = {"POST", "PUT", "PATCH", "DELETE"}
PROTECTED = [
    ("/distribute", b"application/json"),
    ("/distribute/upload", b"multipart/form-data; boundary=x"),
    ("/queues/some-queue/clear", b"application/json"),
    ("/cleanup", b"application/json"),
]


def call(
    app: FastAPI, path: str, headers: list[tuple[bytes, bytes]], body: bytes | None = None
) -> tuple[dict[str, Any], bool]:
    """Run one POST through the ASGI app; returns (response start message, whether the app
    read the body). Without ``body``, reading it fails the test."""
    sent: list[dict[str, Any]] = []
    read = False

    async def receive() -> dict[str, Any]:
        nonlocal read
        read = True
        if body is None:
            raise AssertionError(f"POST {path}: the body was read")
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8080),
    }
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body_bytes = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return {**start, "json": json.loads(body_bytes)}, read


@pytest.fixture
def app(make_agent: AgentFactory) -> FastAPI:
    return create_app(make_agent())


@pytest.mark.parametrize(
    "authorization",
    [None, b"Bearer wrong", b"Basic " + TOKEN.encode(), b"Bearer " + TOKEN.encode() + b"x", b""],
)
@pytest.mark.parametrize(("path", "content_type"), PROTECTED)
def test_401_without_reading_the_body(
    app: FastAPI, path: str, content_type: bytes, authorization: bytes | None
) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(DECLARED_BYTES).encode())]
    if authorization is not None:
        headers.append((b"authorization", authorization))
    response, read = call(app, path, headers)
    assert response["status"] == 401
    assert not read
    answer = dict(response["headers"])
    assert answer[b"www-authenticate"] == b"Bearer"
    assert answer[b"connection"] == b"close"
    assert "API token" in response["json"]["detail"]


def test_with_the_token_the_body_is_read(app: FastAPI) -> None:
    """The counterpart: the test above would notice a body being read."""
    for authorization in [b"Bearer " + TOKEN.encode(), b"bearer  " + TOKEN.encode()]:
        headers = [(b"content-type", b"application/json"), (b"authorization", authorization)]
        response, read = call(app, "/queues/q/clear", headers, body=b'{"mode": "all"}')
        assert read
        assert response["status"] == 404


def test_dev_mode_without_a_token_reads_the_body(make_agent: AgentFactory) -> None:
    app = create_app(make_agent(dev_mode=True, api_token=None))
    headers = [(b"content-type", b"application/json")]
    response, read = call(app, "/queues/q/clear", headers, body=b'{"mode": "all"}')
    assert read
    assert response["status"] == 404


def test_every_mutating_route_declares_the_token_and_openapi_shows_it(app: FastAPI) -> None:
    mutating = [r for r in routes_of(app) if set(r.methods or ()) & MUTATING]
    assert len(mutating) >= 4
    unprotected = [r.path for r in mutating if not needs_token(r)]
    assert unprotected == [], "every mutating route must declare Authorized (deps.py)"
    assert {path for path, _ in protected_routes(app)} >= {
        "/distribute",
        "/distribute/upload",
        "/queues/{name}/clear",
        "/cleanup",
    }
    spec = app.openapi()
    assert spec["paths"]["/distribute"]["post"]["security"] == [{"HTTPBearer": []}]
    assert "security" not in spec["paths"]["/queues"]["get"]


def http_head(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_real_server_answers_401_at_once_and_closes(agent: PublisherAgent) -> None:
    """Over a socket: 24 MB declared, not one byte of it sent, and the 401 comes anyway."""
    request = (
        f"POST /distribute HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {DECLARED_BYTES}\r\n"
    )
    with AppServer(create_app(agent)) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            started = time.monotonic()
            sock.sendall(request.encode() + b"\r\n")
            head = http_head(sock)
            elapsed = time.monotonic() - started
            assert head.startswith(b"HTTP/1.1 401"), head
            assert b"www-authenticate: Bearer" in head.lower().replace(b"bearer", b"Bearer")
            assert elapsed < 2.0  # milliseconds in fact; generous for a loaded machine
            # The server closes: the undeclared rest of the body is never taken for a request.
            sock.settimeout(5)
            while sock.recv(65536):
                pass
        # With the token, the same request waits for its body: the 401 above did not.
        with socket.create_connection(("127.0.0.1", server.port), timeout=0.5) as sock:
            sock.sendall(f"{request}Authorization: Bearer {TOKEN}\r\n\r\n".encode())
            with pytest.raises(TimeoutError):
                sock.recv(65536)
