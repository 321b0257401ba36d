"""Response bodies of the REST API (camelCase JSON, like the request)."""

from __future__ import annotations

import dataclasses
from typing import Any, Self, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.alias_generators import to_camel

from publisher.clear import ClearMode, ClearResult
from publisher.discovery import Subscriber
from publisher.distribute.cleanup import CleanupResult
from publisher.distribute.request import Action
from publisher.pause import PauseResult
from publisher.queues.views import QueueItem, QueueState, QueueSummary


class ApiModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    @classmethod
    def of(cls, result: object, **overrides: Any) -> Self:
        """The response of ``result`` (the dataclass the publisher answers with): each field
        the attribute of its name, or the value ``overrides`` gives it (fields named
        otherwise, or computed). A field neither has is a bug: AttributeError."""
        return cls.model_validate(
            {
                name: overrides[name] if name in overrides else getattr(result, name)
                for name in cls.model_fields
            }
        )


def response_of(result: type[Any]) -> type[ApiModel]:
    """The response model of the result dataclass ``result``, field for field (its name,
    ``Result`` made ``Response``): a route that answers one declares it as its
    ``response_model``."""
    hints = get_type_hints(result)
    fields: dict[str, Any] = {f.name: (hints[f.name], ...) for f in dataclasses.fields(result)}
    name = result.__name__.removesuffix("Result") + "Response"
    return create_model(name, __base__=ApiModel, __module__=__name__, **fields)


class DistributeResponse(ApiModel):
    package_id: str
    action: Action
    offset: int = Field(description="Offset of the PackageMessage on the package topic")
    size: int = Field(description="Serialized package size in bytes")
    spilled: bool = Field(description="True when the package went to the blob store")
    blob_key: str | None
    paths: list[str]
    deep_paths: list[str]
    node_count: int
    binaries_referenced: int
    throttled_s: float = Field(
        description="Seconds the request was held back because a subscriber queue was long"
    )


class QueueModel(ApiModel):
    name: str
    subscriber_sling_id: str
    subscriber_agent_name: str
    state: QueueState
    size: int
    head_offset: int | None
    processed_offset: int | None
    head_attempts: int
    lag_ms: int
    editable: bool
    max_retries: int
    error_queue: str = Field(description="Every subscriber has one (empty unless it failed)")
    error_queue_size: int

    @classmethod
    def of_summary(cls, s: QueueSummary) -> QueueModel:
        return cls.of(
            s,
            subscriber_sling_id=s.subscriber.sling_id,
            subscriber_agent_name=s.subscriber.agent_name,
            editable=s.subscriber.editable,
            max_retries=s.subscriber.max_retries,
            error_queue=s.error_queue_name,
        )


class ErrorModel(ApiModel):
    message: str
    stacktrace: str
    reported_ms: int


# The fields of a queue item taken from its package entry, and their value without one.
ENTRY_FIELDS: dict[str, Any] = {
    "package_id": None,
    "action": None,
    "paths": [],
    "deep_paths": [],
    "size": None,
    "created_ms": None,
}


class QueueItemModel(ApiModel):
    id: str
    offset: int
    package_id: str | None
    action: Action | None
    paths: list[str]
    deep_paths: list[str]
    size: int | None
    created_ms: int | None
    attempts: int
    last_error: ErrorModel | None

    @classmethod
    def of_item(cls, item: QueueItem) -> QueueItemModel:
        """The item's own fields, its package's (none of an item whose package is gone)."""
        e = item.entry
        err = item.last_error
        return cls.of(
            item,
            **{name: getattr(e, name) if e else empty for name, empty in ENTRY_FIELDS.items()},
            last_error=ErrorModel.of(err) if err else None,
        )


class QueuePage(ApiModel):
    queue: str
    total: int
    skip: int
    limit: int
    items: list[QueueItemModel]


class ClearRequest(ApiModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    mode: ClearMode = Field(
        description="head: the head item; first: the first `count` items (every item without "
        "a count); upTo: every item with offset <= `offset`; all: every item"
    )
    count: int | None = Field(default=None, ge=1)
    offset: int | None = Field(default=None, ge=0)


ClearResponse = response_of(ClearResult)


PauseResponse = response_of(PauseResult)


class SubscriberStateModel(ApiModel):
    pub_agent_name: str
    offset: int  # as announced: the offset of the log the subscriber reads
    retries: int
    sequence: int  # the last package number applied (0: unknown)


class SubscriberModel(ApiModel):
    queue_name: str
    sling_id: str
    agent_name: str
    editable: bool
    max_retries: int
    last_seen_ms: int
    remote: bool  # announced on another region's copy of the discovery topic
    states: list[SubscriberStateModel]

    @classmethod
    def of_subscriber(cls, s: Subscriber) -> SubscriberModel:
        return cls.of(
            s,
            states=[
                SubscriberStateModel.of(v, pub_agent_name=k) for k, v in sorted(s.states.items())
            ],
        )


class AgentModel(ApiModel):
    agent_name: str
    instance_id: str
    leader: bool
    state: QueueState
    queues: int
    items: int
    cached_entries: int
    last_event_offset: int | None = Field(
        description="Offset of the last package a distributed event was sent for (leader)"
    )


CleanupResponse = response_of(CleanupResult)


class HealthModel(ApiModel):
    status: str
