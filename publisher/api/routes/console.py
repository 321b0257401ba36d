"""The operator console: the page (``GET /console``), its assets, and the read-only JSON it
needs beyond the REST API.

The page reads the API's own endpoints (``/agent``, ``/queues`` page by page, a queue's items
and error queue) plus three of its own here: the latest packages on the log with how many
subscribers imported each, the distributed events read back from the event topic, and the
last error of every queue head (one request instead of one per failing queue). Like every
read of the API these need no token; the page acts only through the API's authorized
endpoints (``POST /distribute``, ``/queues/{name}/clear``, ``/cleanup``), sending the token the
operator typed in an ``Authorization`` header, so the console adds no second way in. The body
limit middleware covers these routes like every other.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from functools import cache
from importlib import resources
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request, Response
from pydantic import Field

from publisher.agent import PublisherAgent
from publisher.api.deps import AgentDep
from publisher.api.models import ApiModel
from publisher.console.recent_events import RecentEvents
from publisher.distribute.request import Action
from publisher.queues.positions import processed_offset
from runtime.clock import now_ms

router = APIRouter(tags=["console"])

# Packages and events a page can ask for: a screenful, not an export.
MAX_ROWS = 100
DEFAULT_ROWS = 20
# Offsets looked through for the latest packages: a log where other writers fill most offsets
# shows fewer rows rather than fetching without end.
MAX_SCAN_OFFSETS = 4096
STATIC = resources.files("publisher.console") / "static"
ASSETS = {
    "text.js": "text/javascript; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}
# The page runs only its own script and style: even if a string ever slipped through the
# script's escaping, the browser would refuse inline script, event handlers and foreign
# origins. No framing (clickjacking of the action buttons), no referrer with the page's URL.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
# The page and its assets change with the installed scd only; a reload after an upgrade must
# not mix versions, and revalidating three small files costs nothing.
CACHE_HEADERS = {"Cache-Control": "no-cache"}
_events_lock = threading.Lock()

Rows = Annotated[int, Query(ge=1, le=MAX_ROWS, description="Rows to return, newest first")]


class PackageRow(ApiModel):
    offset: int
    package_id: str
    action: Action
    paths: list[str]
    deep_paths: list[str]
    size: int
    spilled: bool
    created_ms: int
    age_s: float
    imported: int = Field(description="Alive subscribers that imported it")
    failed: int = Field(description="Alive subscribers that skipped it into their error queue")


class PackagesView(ApiModel):
    """The latest packages of this agent on the log, newest first."""

    now_ms: int
    next_offset: int
    subscribers: int
    packages: list[PackageRow]


class EventRow(ApiModel):
    offset: int
    package_id: str
    paths: list[str]
    deep_paths: list[str]
    application: str
    sent_ms: int
    age_s: float


class FailureRow(ApiModel):
    offset: int
    package_id: str
    subscriber: str
    attempt: int
    max_retries: int
    will_discard: bool
    error_class: str
    exception: str
    message: str
    sent_ms: int
    age_s: float


class EventsView(ApiModel):
    """The latest distributed events and failure events of this agent on the event topic,
    newest first."""

    topic: str
    last_event_offset: int | None
    events: list[EventRow]
    failures: list[FailureRow]
    error: str | None


class HeadError(ApiModel):
    queue: str
    offset: int
    attempts: int
    message: str
    reported_ms: int


@cache
def _asset(name: str) -> bytes:
    return (STATIC / name).read_bytes()


@router.get("/console", include_in_schema=False)
def console_page() -> Response:
    return Response(
        _asset("index.html"),
        media_type="text/html; charset=utf-8",
        headers={**SECURITY_HEADERS, **CACHE_HEADERS},
    )


@router.get("/console/assets/{name}", include_in_schema=False)
def console_asset(name: str) -> Response:
    media_type = ASSETS.get(name)  # a fixed set: no path from the request reaches the disk
    if media_type is None:
        raise HTTPException(status_code=404, detail="no such console asset")
    return Response(
        _asset(name),
        media_type=media_type,
        headers={"X-Content-Type-Options": "nosniff", **CACHE_HEADERS},
    )


@router.get("/console/api/packages")
def latest_packages(agent: AgentDep, limit: Rows = DEFAULT_ROWS) -> PackagesView:
    """The latest packages of this agent and how many alive subscribers imported each."""
    cache = agent.cache
    end = cache.next_offset
    # The cache covers what queues need; older packages are fetched once into it, like a
    # queue does for a subscriber far behind. TEST packages and other agents' records take
    # offsets too, so the window widens until it holds ``limit`` packages (or gets large).
    span = limit
    while True:
        start = max(0, end - span)
        cache.ensure(start)
        entries = cache.entries_between(start - 1, end)
        if len(entries) >= limit or start == 0 or span >= MAX_SCAN_OFFSETS:
            break
        span *= 4
    entries = entries[-limit:]
    progress = _progress(agent, entries[0].offset if entries else end)
    now = now_ms()
    return PackagesView(
        now_ms=now,
        next_offset=end,
        subscribers=len(progress),
        packages=[
            PackageRow(
                offset=e.offset,
                package_id=e.package_id,
                action=e.action,
                paths=list(e.paths),
                deep_paths=list(e.deep_paths),
                size=e.size,
                # The spill rule of this publisher (publisher/distribute/spill.py): a package above
                # the inline limit travels by reference.
                spilled=agent.spill.needed(e.size),
                created_ms=e.created_ms,
                age_s=max(0, now - e.created_ms) / 1000,
                imported=sum(1 for o, bad in progress if o >= e.offset and e.offset not in bad),
                failed=sum(1 for _, bad in progress if e.offset in bad),
            )
            for e in reversed(entries)
        ],
    )


@router.get("/console/api/events")
def latest_events(request: Request, agent: AgentDep, limit: Rows = DEFAULT_ROWS) -> EventsView:
    """The latest PackageDistributedMessages of this agent and the latest failure events about
    its packages, as read back from the event topic (any instance answers; ``error`` says why
    the lists may be stale)."""
    reader = _recent_events(request, agent)
    events, error = reader.latest(limit)
    now = now_ms()
    return EventsView(
        topic=agent.topics.event,
        last_event_offset=agent.events.last_offset,
        error=error,
        events=[
            EventRow(
                offset=e.offset,
                package_id=e.package_id,
                paths=list(e.paths),
                deep_paths=list(e.deep_paths),
                application=e.application,
                sent_ms=e.sent_ms,
                age_s=max(0, now - e.sent_ms) / 1000,
            )
            for e in events
        ],
        failures=[
            FailureRow(
                offset=f.event.offset,
                package_id=f.event.package_id,
                subscriber=f"{f.event.sub_sling_id}-{f.event.sub_agent_name}",
                attempt=f.event.attempt,
                max_retries=f.event.max_retries,
                will_discard=f.event.will_discard,
                error_class=f.event.error_class,
                exception=f.event.exception,
                message=f.event.message,
                sent_ms=f.sent_ms,
                age_s=max(0, now - f.sent_ms) / 1000,
            )
            for f in reader.latest_failures(limit)
        ],
    )


@router.get("/console/api/head-errors")
def head_errors(agent: AgentDep) -> list[HeadError]:
    """The last error each alive subscriber reported for the head of its queue."""
    out = []
    for s in agent.queues.summaries():
        if s.head_offset is None:
            continue
        error = agent.queues.last_error(s, s.head_offset)
        if error is not None:
            out.append(
                HeadError(
                    queue=s.name,
                    offset=s.head_offset,
                    attempts=s.head_attempts,
                    message=error.message,
                    reported_ms=error.reported_ms,
                )
            )
    return out


def _progress(agent: PublisherAgent, low: int) -> list[tuple[int, frozenset[int]]]:
    """Per alive subscriber: its processed offset of this agent's packages (-1: none yet) and
    which offsets from ``low`` on it skipped into its error queue (processed, not imported)."""
    name = agent.settings.agent_name
    out = []
    for s in agent.discovery.alive():
        offset = processed_offset(s, name, agent.cache)
        failed = agent.errors.offsets(s.queue_name)  # sorted, and bounded per subscriber
        out.append(
            (
                offset if offset is not None else -1,
                frozenset(failed[bisect_left(failed, low) :]),
            )
        )
    return out


def _recent_events(request: Request, agent: PublisherAgent) -> RecentEvents:
    # One reader per app, made on first use: the app module stays unaware of the console.
    state = request.app.state
    with _events_lock:
        reader: RecentEvents | None = getattr(state, "console_events", None)
        if reader is None:
            reader = RecentEvents(
                agent.journal, agent.topics.event, agent.settings.agent_name, agent.bad_records
            )
            state.console_events = reader
        return reader
