"""Requests that write, sent to an instance that does not lead, go to the leader.

Every instance of an agent accepts every request; only the leader writes the agent's numbered
records (publisher/replicas.py). On another instance this middleware, inside the token check
and the body limit, relays a writing request (method, path, query, body, the headers that
matter) to the leader's announced address and relays its answer whole: status, body, the
headers a client reads. What the leader answers is what the client gets, its 4xx included.

Failures say whether a retry helps: no leader known, or the leader refused the connection (the
request never left): 503 with Retry-After, after one more lookup. The connection broke after
the request was sent: 503 too, but the package may be on the log (as after any 503 of a send).
A request that was forwarded already is never forwarded again (503 on an instance that does
not lead), so two instances that each take the other for the leader cannot bounce a request.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio.to_thread
import httpx

from publisher.api.body_limit import refuse
from publisher.replicas import LeaderAddress, LeaderDirectory

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

FORWARDED_HEADER = "x-scd-forwarded-by"
# The instance that answered a writing request (the leader), on every such answer.
SERVED_BY_HEADER = "x-scd-served-by"
# The requests that write numbered records or leader-only state.
WRITING = re.compile(r"^/(distribute|distribute/upload|cleanup|queues/[^/]+/(clear|pause|resume))$")
# The request headers the leader needs; the answer's headers a client reads.
REQUEST_HEADERS = ("authorization", "content-type", "accept")
ANSWER_HEADERS = ("content-type", "retry-after", "x-total-count", SERVED_BY_HEADER)
RETRY_AFTER_S = "1"
ELECTION_POLL_S = 0.05
CONNECT_TIMEOUT_S = 2.0


class ForwardMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        directory: LeaderDirectory,
        leads: Callable[[], bool],
        timeout_s: float,
        election_wait_s: float,
    ) -> None:
        """``leads``: whether this instance leads now; ``timeout_s``: how long a forwarded
        request may take at the leader (its send timeout, and a margin); ``election_wait_s``:
        how long a request waits for a leader while none is known."""
        self.app = app
        self.directory = directory
        self.leads = leads
        self.election_wait_s = election_wait_s
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s, connect=CONNECT_TIMEOUT_S), follow_redirects=False
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not WRITING.match(scope["path"]):
            await self.app(scope, receive, send)
            return
        if self.leads():
            await self._here(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        if FORWARDED_HEADER in headers:
            await self._unavailable(
                send,
                f"instance {self.directory.instance_id} does not lead agent "
                f"{self.directory.agent} (forwarded by {headers[FORWARDED_HEADER][:200]}): retry",
            )
            return
        body = await _body(receive)
        if not await self._forward(scope, headers, body, send):
            # This instance became the leader meanwhile: the app reads the body read above.
            await self._here(scope, _replay(body), send)

    async def _here(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, _served_by(send, self.directory.instance_id))

    async def _forward(
        self, scope: Scope, headers: dict[str, str], body: bytes, send: Send
    ) -> bool:
        """Relay the request to the leader and its answer back (True), or False when this
        instance leads now. While no leader answers (an election under way: at start, or
        after the leader died) it waits up to ``election_wait_s`` for one."""
        query = scope["query_string"].decode("latin-1")
        target = scope["path"] + (f"?{query}" if query else "")
        outgoing = {k: headers[k] for k in REQUEST_HEADERS if k in headers}
        outgoing[FORWARDED_HEADER] = self.directory.instance_id
        deadline = time.monotonic() + self.election_wait_s
        refused: set[LeaderAddress] = set()  # announcements whose instance did not answer
        while True:
            if self.leads():
                return False
            leader = await anyio.to_thread.run_sync(self.directory.leader, bool(refused))
            if (
                leader is not None
                and leader not in refused
                and leader.instance_id != self.directory.instance_id
            ):
                try:
                    answer = await self.client.post(
                        leader.url + target, content=body, headers=outgoing
                    )
                except (httpx.ConnectError, httpx.ConnectTimeout):
                    refused.add(leader)  # never sent: waiting for another is safe
                except httpx.HTTPError as exc:
                    await self._unavailable(
                        send,
                        f"the leader {leader.instance_id} did not answer "
                        f"({type(exc).__name__}): the request may have been carried out; retry",
                    )
                    return True
                else:
                    await _relay(answer, send)
                    return True
            if time.monotonic() >= deadline:
                # Leaders are elected through the journal: without one, the election is under
                # way, or this instance cannot reach the journal to learn its outcome.
                error = self.directory.read_error
                cause = f"; the journal could not be read: {error}" if error else ""
                await self._unavailable(
                    send,
                    f"no leader of agent {self.directory.agent} is reachable now (none was "
                    f"elected on the journal within {self.election_wait_s:.0f} s{cause}): retry",
                )
                return True
            await anyio.sleep(ELECTION_POLL_S)

    async def _unavailable(self, send: Send, detail: str) -> None:
        await refuse(send, 503, detail, {"Retry-After": RETRY_AFTER_S})


def _served_by(send: Send, instance_id: str) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [
                *message.get("headers", []),
                (SERVED_BY_HEADER.encode(), instance_id.encode("latin-1", "replace")),
            ]
        await send(message)

    return sending


def _replay(body: bytes) -> Receive:
    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


async def _body(receive: Receive) -> bytes:
    """The request body (the body limit outside has bounded it)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _relay(answer: httpx.Response, send: Send) -> None:
    headers = [
        (k.encode(), answer.headers[k].encode("latin-1", "replace"))
        for k in ANSWER_HEADERS
        if k in answer.headers
    ]
    body = answer.content
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": answer.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": body})
