"""The one client of the publisher's REST API (docs/rest-api.md): what the scd CLI, the demo,
the benches and the tests call a running publisher with.

Each call answers the JSON the API answers, and raises :class:`PublisherUnreachable` when no
answer came (retriable) or :class:`PublisherRefused` (with the HTTP status and the API's
``detail``) for an answer of 400 or more. ``http`` is the underlying :class:`httpx.Client`
(base URL and token set), for what the typed calls do not cover.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any, Literal

import httpx

from publisher.errors import PublisherRefused, PublisherUnreachable

# A distribute returns once the package is on the log; the journal's send timeout (30 s)
# bounds that, plus time to build and spill a large package.
REQUEST_TIMEOUT_S = 120.0
# Elements asked for per request of a paged list: the API's largest page.
QUEUES_PAGE = 1000

ClearMode = Literal["head", "first", "upTo", "all"]
QueueCommand = Literal["pause", "resume"]


class PublisherClient:
    """The REST API of the publisher at ``url`` (``token``: the API token, for the calls
    that change something); ``http``: an httpx client to call it through instead (such as
    FastAPI's TestClient of an app in this process)."""

    def __init__(
        self,
        url: str = "",
        token: str | None = None,
        *,
        timeout_s: float = REQUEST_TIMEOUT_S,
        http: httpx.Client | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if http is None:
            http = httpx.Client(base_url=url, headers=headers, timeout=timeout_s)
        else:
            http.headers.update(headers)
        self.http = http

    def __enter__(self) -> PublisherClient:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    # ------------------------------------------------------------------ any call
    def response(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The answer of a successful call (PublisherUnreachable, PublisherRefused else)."""
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise PublisherUnreachable(
                f"publisher at {self.http.base_url} unreachable: {exc}"
            ) from exc
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text
            raise PublisherRefused(method, path, response.status_code, str(detail))
        return response

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer of a successful call."""
        return self.response(method, path, **kwargs).json()

    def every_page(self, path: str, page: int = QUEUES_PAGE) -> list[Any]:
        """Every element of a paged list (X-Total-Count says how many there are)."""
        out: list[Any] = []
        while True:
            response = self.response("GET", path, params={"skip": len(out), "limit": page})
            found = response.json()
            out.extend(found)
            total = int(response.headers.get("x-total-count", len(out)))
            if not found or len(out) >= total:
                return out

    # ------------------------------------------------------------------ the API
    def ready(self) -> bool:
        """Whether the publisher answers GET /ready with 200 (False: not, or no answer)."""
        try:
            return self.http.get("/ready").status_code == 200
        except httpx.HTTPError:
            return False

    def distribute(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST /distribute: the package built, sent and answered (its offset, size, ...)."""
        answer: dict[str, Any] = self.call("POST", "/distribute", json=dict(body))
        return answer

    def agent(self) -> dict[str, Any]:
        """GET /agent: its name, leadership, state and counts."""
        answer: dict[str, Any] = self.call("GET", "/agent")
        return answer

    def queues(self, page: int = QUEUES_PAGE) -> list[dict[str, Any]]:
        """Every subscriber queue (GET /queues, page by page)."""
        return self.every_page("/queues", page)

    def subscribers(self, page: int = QUEUES_PAGE) -> list[dict[str, Any]]:
        """Every subscriber discovery knows (GET /subscribers, page by page)."""
        return self.every_page("/subscribers", page)

    def queue_command(self, queue: str, command: QueueCommand) -> dict[str, Any]:
        """POST /queues/{queue}/pause or /resume."""
        answer: dict[str, Any] = self.call("POST", f"/queues/{queue}/{command}")
        return answer

    def clear(
        self, queue: str, mode: ClearMode, count: int | None = None, offset: int | None = None
    ) -> dict[str, Any]:
        """POST /queues/{queue}/clear (``count`` with mode first, ``offset`` with upTo)."""
        body: dict[str, Any] = {"mode": mode}
        if count is not None:
            body["count"] = count
        if offset is not None:
            body["offset"] = offset
        answer: dict[str, Any] = self.call("POST", f"/queues/{queue}/clear", json=body)
        return answer

    def cleanup(self) -> dict[str, Any]:
        """POST /cleanup: the package blob cleanup, run now."""
        answer: dict[str, Any] = self.call("POST", "/cleanup")
        return answer
