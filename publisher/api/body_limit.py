"""Refuse request bodies above the configured size before anything parses them (413).

A declared Content-Length above the limit is refused at once; a body without one (chunked) is
read up to the limit and refused as soon as it passes it, then replayed to the application.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            await self._declared(declared, scope, receive, send)
        elif headers.get(b"transfer-encoding") is not None:
            await self._chunked(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _declared(self, declared: bytes, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            length = int(declared)
        except ValueError:
            await refuse(send, 400, "Content-Length is not a number")
            return
        if length > self.max_bytes:
            await refuse(send, 413, self._message(length))
            return
        await self.app(scope, receive, send)

    async def _chunked(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Read the body up to the limit, then hand it to the app as if unread."""
        chunks: list[Message] = []
        total = 0
        while True:
            message = await receive()
            chunks.append(message)
            if message["type"] != "http.request":
                break
            total += len(message.get("body", b""))
            if total > self.max_bytes:
                await refuse(send, 413, self._message(total, at_least=True))
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return chunks.pop(0) if chunks else await receive()

        await self.app(scope, replay, send)

    def _message(self, size: int, at_least: bool = False) -> str:
        return (
            f"request body of {'more than ' if at_least else ''}{size} bytes exceeds the limit "
            f"of {self.max_bytes} bytes"
        )


async def refuse(
    send: Send, status: int, detail: str, headers: Mapping[str, str] | None = None
) -> None:
    """Answer ``{"detail": ...}`` without reading the request body, and close the connection:
    the unread body must not be taken for the next request."""
    body = json.dumps({"detail": detail}).encode()
    extra = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
