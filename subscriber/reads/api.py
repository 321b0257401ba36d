"""The read API of a subscriber daemon, on its health endpoint's port (docs/read-api.md).

* ``GET|HEAD /content/{path}[?depth=N]``: the current node as JSON (subscriber.reads.documents);
* ``GET|HEAD /tree/{path}[?after=PATH&limit=N&shallow=true]``: the nodes at and below the path
  in path order, a page at a time (subscriber.reads.documents.tree_page);
* ``GET|HEAD /binaries/{path}?property=NAME`` (default ``jcr:data``): a binary's bytes, with
  ``ETag`` (its sha256), ``If-None-Match`` (304) and one ``Range`` (206, 416 past the end),
  verified as it streams (subscriber.reads.binaries);
* a daemon of several agents serves each agent's under ``/agents/{name}``; one of one agent
  serves both.

Every answer from a read model names the processed offset (``X-Scd-Offset``, -1: none) and the
table version (``X-Scd-Table-Version``) it reflects. Errors are JSON ``{"error": reason}``:
400 a path the content rules refuse or a bad parameter, 401 without the read token when one
is set, 404 no such node, agent or binary, 502 a blob missing or not matching its reference,
503 no model to answer from (being built or rebuilt, a standby, too many reads waiting).

A read of one node (``/content`` without ``depth``, a binary's look-up) runs in the event
loop: one primary-key look-up and at most MAX_CHILDREN + 1 child names, bounded whatever the
request. Every other read (subtrees, tree pages, a binary's chunks) runs in a pool of its own
(READ_THREADS), never in the threads /health and /ready run in; no read takes a lock the
import loop takes: a slow or hostile reader can hold a read thread for one chunk at most, and
the rest of its time costs a socket and a chunk.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any, Protocol, TypeVar

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from blobstore.api import BlobStore
from journal.content import rules
from journal.content.package import FILE_DATA
from subscriber.content import open_stored_binary
from subscriber.errors import ContentError, Unavailable, Unsatisfiable
from subscriber.reads import binaries, documents
from subscriber.reads.documents import OFFSET_HEADER, VERSION_HEADER
from subscriber.reads.model import Answer, ReadModel
from subscriber.store.rows import BinaryInfo, StoredNode

log = logging.getLogger(__name__)

# Threads doing reads (index look-ups, blob chunks); reads beyond them wait their turn, and
# beyond MAX_WAITING more are refused (503) rather than queued without end.
READ_THREADS = 8
MAX_WAITING = 256
DEFAULT_TYPE = "application/octet-stream"

T = TypeVar("T")


class Readers(Protocol):
    """The read models of a daemon's agents (subscriber.fleet.view.AgentsView)."""

    def reader(self, agent: str | None) -> ReadModel:
        """``agent``'s model (None: the daemon's only agent); LookupError with the reason."""


def _error(status: int, reason: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": reason}, status_code=status, headers=headers)


def _reflects(answer: Answer[Any]) -> dict[str, str]:
    offset = -1 if answer.processed is None else answer.processed
    return {OFFSET_HEADER: str(offset), VERSION_HEADER: str(answer.version)}


def _json_answer(request: Request, value: Any, headers: dict[str, str]) -> Response:
    """A JSON document, or for HEAD its headers alone."""
    response = JSONResponse(value, headers=headers)
    if request.method == "HEAD":
        return Response(headers=dict(response.headers), media_type=response.media_type)
    return response


def _etag_matches(header: str | None, etag: str) -> bool:
    if header is None:
        return False
    tags = [t.strip().removeprefix("W/").strip('"') for t in header.split(",")]
    return "*" in tags or etag in tags


class ReadApi:
    """The routes above over ``readers``, binaries from ``blobs``; ``token``: the bearer token
    every read must carry (None: reads are open)."""

    def __init__(self, readers: Readers, blobs: BlobStore | None, token: str | None) -> None:
        self.readers = readers
        self.blobs = blobs
        self.token = token
        self._pool = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="scd-read")
        self._waiting = 0  # reads given to the pool and not done (the event loop's count)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _run(self, call: Callable[[], T], *, admit: bool = True) -> T:
        """``call`` in the read pool; Unavailable when too many wait (``admit``: a new read;
        the chunks of a stream already started are always taken)."""
        if admit and self._waiting >= MAX_WAITING:
            raise Unavailable(f"{MAX_WAITING} reads are waiting: try again")
        self._waiting += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, call)
        finally:
            self._waiting -= 1

    def router(self) -> APIRouter:
        router = APIRouter()
        for prefix in ("", "/agents/{agent}"):
            router.add_api_route(
                prefix + "/content{path:path}", self.content, methods=["GET", "HEAD"]
            )
            router.add_api_route(
                prefix + "/binaries{path:path}", self.binary, methods=["GET", "HEAD"]
            )
            router.add_api_route(prefix + "/tree{path:path}", self.tree, methods=["GET", "HEAD"])
        return router

    # ------------------------------------------------------------------ common steps
    def _refused(self, request: Request) -> Response | None:
        if self.token is None:
            return None
        given = request.headers.get("authorization", "")
        scheme, _, credentials = given.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            credentials.strip().encode(), self.token.encode()
        ):
            return None
        return _error(
            401, "a read token is required (Authorization: Bearer)", {"WWW-Authenticate": "Bearer"}
        )

    async def _read(
        self,
        request: Request,
        path: str,
        agent: str | None,
        what: Callable[[Any, str], T],
        *,
        inline: bool = False,
    ) -> tuple[Answer[T], str] | Response:
        """Authorize, find the agent's model, check the path, read ``what(reading, path)``:
        in the read pool, or (``inline``) in the event loop, for a read bounded by one node and
        its first child names."""
        refused = self._refused(request)
        if refused is not None:
            return refused
        try:
            model = self.readers.reader(agent)
        except LookupError as exc:
            return _error(404, str(exc.args[0]))
        try:
            node_path = documents.checked_path(path)
        except rules.ContentRuleError as exc:
            return _error(400, f"path refused by the content rules: {exc}")

        def read() -> Answer[T]:
            return model.read(lambda r: what(r, node_path))

        try:
            # A hop to a pool thread waits for the GIL behind the event loop (up to its 5 ms
            # switch interval) and then wakes the loop again: more than the read itself.
            return (read() if inline else await self._run(read)), node_path
        except Unavailable as exc:
            return _error(503, exc.reason, {"Retry-After": "1"})

    # ------------------------------------------------------------------ /content
    async def content(self, request: Request, path: str, agent: str | None = None) -> Response:
        try:
            depth = documents.checked_depth(request.query_params.get("depth"))
        except ValueError as exc:
            return _error(400, str(exc))
        prefix = "" if agent is None else f"/agents/{agent}"
        read = await self._read(
            request,
            path,
            agent,
            lambda r, p: documents.subtree(r, p, depth, prefix),
            inline=depth == 0,
        )
        if isinstance(read, Response):
            return read
        answer, node_path = read
        headers = _reflects(answer)
        if answer.value is None:
            return _error(404, f"no node at {node_path}: never distributed, or deleted", headers)
        return _json_answer(request, answer.value, headers)

    # ------------------------------------------------------------------ /tree
    async def tree(self, request: Request, path: str, agent: str | None = None) -> Response:
        params = request.query_params
        try:
            limit = documents.checked_limit(params.get("limit"))
            after = documents.checked_path(params["after"]) if "after" in params else ""
        except (ValueError, rules.ContentRuleError) as exc:
            return _error(400, f"bad tree page: {exc}")
        shallow = params.get("shallow", "false").lower() in ("1", "true")
        prefix = "" if agent is None else f"/agents/{agent}"
        read = await self._read(
            request,
            path,
            agent,
            lambda r, p: documents.tree_page(r, p, after, limit, shallow, prefix),
        )
        if isinstance(read, Response):
            return read
        answer, _ = read
        return _json_answer(request, answer.value, _reflects(answer))

    # ------------------------------------------------------------------ /binaries
    async def binary(self, request: Request, path: str, agent: str | None = None) -> Response:
        prop = request.query_params.get("property", FILE_DATA)
        try:
            rules.check_name(prop)
        except rules.ContentRuleError as exc:
            return _error(400, f"property refused by the content rules: {exc}")
        read = await self._read(request, path, agent, lambda r, p: r.node(p), inline=True)
        if isinstance(read, Response):
            return read
        answer, node_path = read
        node: StoredNode | None = answer.value
        headers = _reflects(answer)
        if node is None:
            return _error(404, f"no node at {node_path}: never distributed, or deleted", headers)
        info = node.binaries.get(prop)
        if info is None:
            return _error(404, f"node {node_path} has no binary property {prop!r}", headers)
        return await self._bytes(request, node_path, prop, info, headers)

    async def _bytes(
        self, request: Request, path: str, prop: str, info: BinaryInfo, headers: dict[str, str]
    ) -> Response:
        size = info.size if info.data is None else len(info.data)
        headers = {**headers, "Accept-Ranges": "bytes", "X-Content-Type-Options": "nosniff"}
        sha256 = documents.binary_sha256(info)
        if sha256 is not None:
            headers["ETag"] = f'"{sha256}"'
            if _etag_matches(request.headers.get("if-none-match"), sha256):
                return Response(status_code=304, headers=headers)
        try:
            wanted = binaries.byte_range(request.headers.get("range"), size)
        except Unsatisfiable as exc:
            headers["Content-Range"] = f"bytes */{size}"
            return _error(416, f"range not satisfiable: {exc}", headers)
        status = 200
        length = size
        if wanted is not None:
            status, length = 206, wanted.length
            headers["Content-Range"] = f"bytes {wanted.start}-{wanted.end}/{size}"
        headers["Content-Length"] = str(length)
        media_type = info.content_type or DEFAULT_TYPE
        if request.method == "HEAD":
            return Response(status_code=status, headers=headers, media_type=media_type)
        stack = ExitStack()
        try:
            chunks = await self._run(lambda: self._open(stack, path, prop, info, wanted))
            first = await self._run(lambda: next(chunks, b""))
        except ContentError as exc:  # missing, unreachable, or (read whole already) corrupt
            await self._run(stack.close, admit=False)
            log.warning("binary %s of %s not served: %s", prop, path, exc)
            return _error(502, str(exc), {k: headers[k] for k in (OFFSET_HEADER, VERSION_HEADER)})
        except BaseException:
            await self._run(stack.close, admit=False)
            raise
        return StreamingResponse(
            self._stream(stack, first, chunks, path, prop),
            status_code=status,
            headers=headers,
            media_type=media_type,
        )

    def _open(
        self,
        stack: ExitStack,
        path: str,
        prop: str,
        info: BinaryInfo,
        wanted: binaries.ByteRange | None,
    ) -> Iterator[bytes]:
        stream = stack.enter_context(open_stored_binary(self.blobs, path, prop, info))
        return binaries.read_chunks(stream, wanted)

    async def _stream(
        self, stack: ExitStack, first: bytes, chunks: Iterator[bytes], path: str, prop: str
    ) -> AsyncIterator[bytes]:
        try:
            chunk = first
            while chunk:
                yield chunk
                chunk = await self._run(lambda: next(chunks, b""), admit=False)
        except ContentError as exc:  # cut off: the client sees fewer bytes than announced
            log.warning("binary %s of %s cut off: %s", prop, path, exc)
            raise
        finally:
            await self._run(stack.close, admit=False)
