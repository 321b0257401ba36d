"""A running subscriber's content through its read API (subscriber.reads.api), as a node and
blob source: ``scd content --url`` lists, reads and exports with the same code, output and
checks as on the store itself (subscriber.content, subscriber.export).

Nodes come from ``/content`` (one) and ``/tree`` (a subtree, page by page); a binary's bytes
from its ``/binaries`` URL, which stands in for its blob key. The API checks a binary's size and
sha256 as it streams; this side checks them again (subscriber.content.open_stored_binary), so a
binary altered on the way is never written out as good either.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, BinaryIO
from urllib.parse import quote

import httpx

from blobstore.errors import BlobNotFound
from subscriber.content import COPY_CHUNK_BYTES, JsonValue
from subscriber.errors import ReadApiError
from subscriber.reads.documents import OFFSET_HEADER
from subscriber.store.rows import BinaryInfo, StoredNode

# Each step of a request (connect, one read of the body, ...) waits at most this long.
TIMEOUT_S = 30.0
# A JSON answer (a node, a page of the tree) is read whole: at most this many bytes, within
# this long, whatever the server sends. A page holds at most MAX_NODES documents of nodes that
# each came in one package (decoded: at most 64 MiB); the API's own pages are far smaller.
MAX_ANSWER_BYTES = 128 * 1024 * 1024
ANSWER_DEADLINE_S = 120.0
MAX_ERROR_BYTES = 64 * 1024
# A page of /tree: the API's largest (subscriber.reads.documents.MAX_NODES).
PAGE_NODES = 1000


def _scalar(value: JsonValue) -> tuple[str, str]:
    """A JSON property value back in the store's (type, text) form (property_json reversed)."""
    if isinstance(value, bool):
        return "bool", "true" if value else "false"
    if isinstance(value, int):
        return "long", str(value)
    if isinstance(value, float):
        return "double", repr(value)
    if isinstance(value, dict) and isinstance(value.get("type"), str):
        return value["type"], str(value.get("value", ""))
    return "string", str(value)


def stored_node(doc: dict[str, Any]) -> StoredNode:
    """A node document of the API (subscriber.reads.documents.document) as a stored node."""
    properties: dict[str, tuple[str, bool, list[str]]] = {}
    binaries: dict[str, BinaryInfo] = {}
    for name, value in (doc.get("properties") or {}).items():
        if isinstance(value, dict) and value.get("type") == "binary":
            binaries[name] = BinaryInfo(
                blob_key=str(value["url"]),
                size=int(value["size"]),
                sha256=value.get("sha256"),
                content_type=value.get("contentType"),
                data=None,
            )
        elif isinstance(value, list):
            typed = [_scalar(v) for v in value]
            vtype = typed[0][0] if typed else "string"
            properties[name] = (vtype, True, [text for _, text in typed])
        elif value is None:
            properties[name] = ("string", False, [])
        else:
            vtype, text = _scalar(value)
            properties[name] = (vtype, False, [text])
    return StoredNode(
        path=str(doc["path"]),
        properties=properties,
        binaries=binaries,
        offset=int(doc["offset"]),
        pkg_id=str(doc["packageId"]),
    )


class ReadApiSource:
    """The content one agent of a subscriber daemon serves at ``url`` (``agent``: the name its
    daemon serves it under when it serves several)."""

    def __init__(self, url: str, token: str | None = None, agent: str | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = url.rstrip("/")
        self.prefix = f"/agents/{quote(agent, safe='')}" if agent else ""
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=TIMEOUT_S)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ReadApiSource:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ NodeSource
    def node(self, path: str) -> StoredNode | None:
        answer = self._get(f"{self.prefix}/content{quote(path)}")
        # A 404 that names the offset it reflects comes from the read model: no such node
        # (without one: no such agent, or no read API here).
        if answer.status == 404 and OFFSET_HEADER in answer.headers:
            return None
        return stored_node(self._json(answer))

    def nodes(self, root: str = "/", *, deep: bool = True) -> list[StoredNode]:
        found: list[StoredNode] = []
        params = {"limit": str(PAGE_NODES), "shallow": "false" if deep else "true"}
        while True:
            page = self._json(self._get(f"{self.prefix}/tree{quote(root)}", params))
            found.extend(stored_node(doc) for doc in page["nodes"])
            if page.get("next") is None:
                return found
            params["after"] = str(page["next"])

    # ------------------------------------------------------------------ BlobSource
    @contextmanager
    def get(self, key: str) -> Iterator[BinaryIO]:
        """The bytes at a binary's URL (its ``key`` here)."""
        try:
            with self.http.stream("GET", key) as answer:
                if answer.status_code == 404:
                    raise BlobNotFound(key)
                if answer.status_code != 200:
                    # An error answer is small; a hostile one is cut at what the reason needs.
                    head = next(answer.iter_bytes(MAX_ERROR_BYTES), b"")[:MAX_ERROR_BYTES]
                    reason = _error(head) or answer.reason_phrase
                    raise ReadApiError(f"{self.url}{key}: {answer.status_code} {reason}")
                yield io.BufferedReader(_Body(answer.iter_bytes(COPY_CHUNK_BYTES)))
        except httpx.HTTPError as exc:
            raise ReadApiError(f"{self.url}{key}: {type(exc).__name__}: {exc}") from exc

    # ------------------------------------------------------------------ HTTP
    def _get(self, target: str, params: dict[str, str] | None = None) -> _Answer:
        """A 200 or 404 answer, its body read within MAX_ANSWER_BYTES and ANSWER_DEADLINE_S."""
        deadline = time.monotonic() + ANSWER_DEADLINE_S
        try:
            with self.http.stream("GET", target, params=params) as answer:
                url = str(answer.request.url)
                length = answer.headers.get("content-length", "")
                if length.isdigit() and int(length) > MAX_ANSWER_BYTES:
                    raise ReadApiError(
                        f"{url}: an answer of {length} bytes (over {MAX_ANSWER_BYTES})"
                    )
                body = bytearray()
                # As the bytes arrive (a chunk size would wait for a dripping body to fill it).
                for chunk in answer.iter_bytes():
                    body += chunk
                    if len(body) > MAX_ANSWER_BYTES:
                        raise ReadApiError(f"{url}: an answer over {MAX_ANSWER_BYTES} bytes")
                    if time.monotonic() > deadline:
                        raise ReadApiError(f"{url}: the answer took over {ANSWER_DEADLINE_S} s")
                got = _Answer(
                    answer.status_code, answer.reason_phrase, answer.headers, bytes(body), url
                )
        except httpx.HTTPError as exc:
            raise ReadApiError(f"{self.url}{target}: {type(exc).__name__}: {exc}") from exc
        if got.status not in (200, 404):
            raise ReadApiError(f"{got.url}: {got.reason()}")
        return got

    def _json(self, answer: _Answer) -> Any:
        if answer.status != 200:
            raise ReadApiError(f"{answer.url}: {answer.reason()}")
        try:
            return json.loads(answer.body)
        except ValueError as exc:
            raise ReadApiError(f"{answer.url}: not a JSON answer") from exc


@dataclass(frozen=True)
class _Answer:
    """One answer of the API, read whole."""

    status: int
    phrase: str
    headers: httpx.Headers
    body: bytes
    url: str

    def reason(self) -> str:
        return f"{self.status} {_error(self.body) or self.phrase}"


def _error(body: bytes) -> str | None:
    """The ``error`` of a JSON error answer, if it has one."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return None
    return error if isinstance(error, str) else None


class _Body(io.RawIOBase):
    """A streamed answer body as a file."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        super().__init__()
        self._chunks = chunks
        self._left = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._left:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._left = chunk
        view = memoryview(buffer).cast("B")
        count = min(len(view), len(self._left))
        view[:count] = self._left[:count]
        self._left = self._left[count:]
        return count
