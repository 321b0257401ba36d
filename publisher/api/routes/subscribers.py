"""The discovery view: alive subscribers."""

from __future__ import annotations

from fastapi import APIRouter

from publisher.api.deps import AgentDep
from publisher.api.models import SubscriberModel

router = APIRouter(tags=["subscribers"])


@router.get("/subscribers")
def list_subscribers(agent: AgentDep) -> list[SubscriberModel]:
    """Subscribers that announced themselves within the discovery TTL."""
    return [SubscriberModel.of(s) for s in agent.discovery.alive()]
