"""The discovery view: alive subscribers."""

from __future__ import annotations

from fastapi import APIRouter, Response

from publisher.api.deps import AgentDep
from publisher.api.models import SubscriberModel
from publisher.api.routes.queues import DEFAULT_PAGE_ITEMS, LIST_PAGE, TOTAL_HEADER, Limit, Skip

router = APIRouter(tags=["subscribers"])


@router.get("/subscribers", responses=LIST_PAGE)
def list_subscribers(
    agent: AgentDep, response: Response, skip: Skip = 0, limit: Limit = DEFAULT_PAGE_ITEMS
) -> list[SubscriberModel]:
    """Subscribers that announced themselves within the discovery TTL, a page at a time; the
    total is in X-Total-Count."""
    alive = agent.discovery.alive()
    response.headers[TOTAL_HEADER] = str(len(alive))
    page = alive[skip : skip + min(limit, agent.settings.max_page_items)]
    return [SubscriberModel.of_subscriber(s) for s in page]
