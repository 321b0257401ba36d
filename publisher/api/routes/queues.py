"""Queues: one per alive subscriber (or the two aggregated ones), their items, error queues,
and clear."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from publisher.aggregated_clear import clear_aggregated
from publisher.api.deps import AgentDep, Authorized
from publisher.api.models import (
    AgentModel,
    ApiModel,
    ClearRequest,
    ClearResponse,
    PauseResponse,
    QueueItemModel,
    QueueModel,
    QueuePage,
)
from publisher.settings import DEFAULT_MAX_PAGE_ITEMS

router = APIRouter(tags=["queues"])

# Items (and queues, subscribers) per page unless asked otherwise.
DEFAULT_PAGE_ITEMS = 100
# The header a list page carries its total in (the body stays a plain JSON list).
TOTAL_HEADER = "X-Total-Count"

Skip = Annotated[int, Query(ge=0, le=2**62, description="Items to skip from the head")]
Limit = Annotated[int, Query(ge=1, le=DEFAULT_MAX_PAGE_ITEMS, description="Page size")]
NOT_FOUND: dict[int | str, dict[str, str]] = {404: {"description": "No alive subscriber has it"}}
LIST_PAGE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "One page, sorted by queue name",
        "headers": {
            TOTAL_HEADER: {
                "description": "How many there are in all (page with skip and limit)",
                "schema": {"type": "integer"},
            }
        },
    }
}


@router.get("/agent")
def agent_state(agent: AgentDep) -> AgentModel:
    """The agent: IDLE (all queues empty), BLOCKED (a queue is blocked) or RUNNING."""
    summaries = agent.queues.summaries()
    status = agent.status()
    return AgentModel.of(
        status,
        state=agent.queues.agent_state(summaries),
        queues=len(summaries),
        items=sum(s.size for s in summaries),
        cached_entries=agent.cache.size,
        last_event_offset=agent.events.last_offset,
    )


@router.get("/queues", responses=LIST_PAGE)
def list_queues(
    agent: AgentDep, response: Response, skip: Skip = 0, limit: Limit = DEFAULT_PAGE_ITEMS
) -> list[QueueModel]:
    """One queue per alive subscriber, or with SCD_PUBLISHER_AGGREGATE_SUBSCRIBER_QUEUES the
    aggregated ones, a page at a time; the total is in X-Total-Count."""
    total, summaries = agent.queues.page(skip, min(limit, agent.settings.max_page_items))
    response.headers[TOTAL_HEADER] = str(total)
    return [QueueModel.of_summary(s) for s in summaries]


@router.get("/queues/{name}", responses=NOT_FOUND)
def queue_items(
    name: str, agent: AgentDep, skip: Skip = 0, limit: Limit = DEFAULT_PAGE_ITEMS
) -> QueuePage:
    """A page of one queue's items, head first."""
    limit = min(limit, agent.settings.max_page_items)
    summary = agent.queues.summary(name)
    items = agent.queues.items(name, skip, limit)
    return QueuePage(
        queue=name,
        total=summary.size,
        skip=skip,
        limit=limit,
        items=[QueueItemModel.of_item(i) for i in items],
    )


@router.get("/queues/{name}/errors", responses=NOT_FOUND)
def error_queue_items(
    name: str, agent: AgentDep, skip: Skip = 0, limit: Limit = DEFAULT_PAGE_ITEMS
) -> QueuePage:
    """A page of the subscriber's error queue: packages it skipped (after its retries, or at
    once for a permanent failure)."""
    limit = min(limit, agent.settings.max_page_items)
    items = agent.queues.error_items(name, skip, limit)
    return QueuePage(
        queue=f"{name}-error",
        total=agent.queues.summary(name).error_queue_size,
        skip=skip,
        limit=limit,
        items=[QueueItemModel.of_item(i) for i in items],
    )


@router.post(
    "/queues/{name}/clear",
    dependencies=[Authorized],
    responses={
        **NOT_FOUND,
        400: {"description": "Mode and count/offset do not fit together"},
        401: {"description": "Missing or invalid API token"},
        409: {"description": "The subscriber is not editable"},
        503: {"description": "Journal unreachable: no command sent, retry"},
    },
    response_model=ClearResponse,
)
def clear_queue(name: str, body: ClearRequest, agent: AgentDep) -> ApiModel:
    """Clear an editable subscriber's queue (sends one ClearCommand), or the aggregated
    editable queue (one ClearCommand to each editable subscriber behind the cleared items)."""
    if agent.queues.is_aggregated(name):
        return ClearResponse.of(
            clear_aggregated(agent.clearer, name, body.mode, body.count, body.offset)
        )
    return ClearResponse.of(agent.clearer.clear(name, body.mode, body.count, body.offset))


PAUSE_RESPONSES: dict[int | str, dict[str, str]] = {
    **NOT_FOUND,
    400: {"description": "An aggregated queue: pause its subscribers one by one"},
    401: {"description": "Missing or invalid API token"},
    503: {"description": "Journal unreachable: no command sent, retry"},
}
PAUSE_ROUTE: dict[str, Any] = {
    "dependencies": [Authorized],
    "responses": PAUSE_RESPONSES,
    "response_model": PauseResponse,
}


@router.post("/queues/{name}/pause", **PAUSE_ROUTE)
def pause_queue(name: str, agent: AgentDep) -> ApiModel:
    """Pause the subscriber: it finishes the commit in progress and imports nothing more until
    resumed (sends one PauseCommand); its queue shows PAUSED once it announced it."""
    return PauseResponse.of(agent.pauser.pause(name, True))


@router.post("/queues/{name}/resume", **PAUSE_ROUTE)
def resume_queue(name: str, agent: AgentDep) -> ApiModel:
    """Resume a paused subscriber: it imports on from the package after its processed offset."""
    return PauseResponse.of(agent.pauser.pause(name, False))
