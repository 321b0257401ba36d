"""Response bodies of the REST API (camelCase JSON, like the request)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from publisher.clear import ClearMode, ClearResult
from publisher.discovery import Subscriber
from publisher.distribute.cleanup import CleanupResult
from publisher.distribute.distributor import DistributeResult
from publisher.distribute.request import Action
from publisher.pause import PauseResult
from publisher.queues.views import QueueItem, QueueState, QueueSummary


class ApiModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


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

    @classmethod
    def of(cls, r: DistributeResult) -> DistributeResponse:
        return cls(
            package_id=r.package_id,
            action=r.action,
            offset=r.offset,
            size=r.size,
            spilled=r.spilled,
            blob_key=r.blob_key,
            paths=r.paths,
            deep_paths=r.deep_paths,
            node_count=r.node_count,
            binaries_referenced=r.binaries_referenced,
            throttled_s=r.throttled_s,
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
    def of(cls, s: QueueSummary) -> QueueModel:
        return cls(
            name=s.name,
            subscriber_sling_id=s.subscriber.sling_id,
            subscriber_agent_name=s.subscriber.agent_name,
            state=s.state,
            size=s.size,
            head_offset=s.head_offset,
            processed_offset=s.processed_offset,
            head_attempts=s.head_attempts,
            lag_ms=s.lag_ms,
            editable=s.subscriber.editable,
            max_retries=s.subscriber.max_retries,
            error_queue=s.error_queue_name,
            error_queue_size=s.error_queue_size,
        )


class ErrorModel(ApiModel):
    message: str
    stacktrace: str
    reported_ms: int


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
    def of(cls, item: QueueItem) -> QueueItemModel:
        e = item.entry
        err = item.last_error
        return cls(
            id=item.id,
            offset=item.offset,
            package_id=e.package_id if e else None,
            action=e.action if e else None,
            paths=list(e.paths) if e else [],
            deep_paths=list(e.deep_paths) if e else [],
            size=e.size if e else None,
            created_ms=e.created_ms if e else None,
            attempts=item.attempts,
            last_error=ErrorModel(
                message=err.message, stacktrace=err.stacktrace, reported_ms=err.reported_ms
            )
            if err
            else None,
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


class ClearResponse(ApiModel):
    queue: str
    removed: int
    clear_offset: int | None
    command_offset: int | None

    @classmethod
    def of(cls, r: ClearResult) -> ClearResponse:
        return cls(
            queue=r.queue,
            removed=r.removed,
            clear_offset=r.clear_offset,
            command_offset=r.command_offset,
        )


class PauseResponse(ApiModel):
    queue: str
    paused: bool  # what the command asks; the queue shows PAUSED once the subscriber announces it
    command_offset: int

    @classmethod
    def of(cls, r: PauseResult) -> PauseResponse:
        return cls(queue=r.queue, paused=r.paused, command_offset=r.command_offset)


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
    def of(cls, s: Subscriber) -> SubscriberModel:
        return cls(
            queue_name=s.queue_name,
            sling_id=s.sling_id,
            agent_name=s.agent_name,
            editable=s.editable,
            max_retries=s.max_retries,
            last_seen_ms=s.last_seen_ms,
            remote=s.remote,
            states=[
                SubscriberStateModel(
                    pub_agent_name=k, offset=v.offset, retries=v.retries, sequence=v.sequence
                )
                for k, v in sorted(s.states.items())
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


class CleanupResponse(ApiModel):
    earliest_offset: int
    latest_offset: int
    deleted: int
    stamped: int
    kept: int
    failed: int

    @classmethod
    def of(cls, r: CleanupResult) -> CleanupResponse:
        return cls(
            earliest_offset=r.earliest_offset,
            latest_offset=r.latest_offset,
            deleted=r.deleted,
            stamped=r.stamped,
            kept=r.kept,
            failed=r.failed,
        )


class HealthModel(ApiModel):
    status: str
