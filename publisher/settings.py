"""Typed publisher settings (environment prefix ``SCD_PUBLISHER_``).

The journal and the blob store keep their own settings (``SCD_JOURNAL_*``, ``SCD_BLOB_*``);
these are the publisher agent's. Outside ``dev_mode`` the API token must be set and must not be
a placeholder: a publisher that accepts anyone's distribute requests is never what production
wants. A signing key (``SIGNING_KEY`` + ``SIGNING_KEY_ID``) makes the publisher sign its
package and command records (journal/wire/signing.py): optional, the production setting.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from runtime.config import ScdSettings

KIB = 1024
# Regions a publisher reads remote discovery and status from: the design point is a handful
# (docs/regions.md); each costs two pollers and two consumers.
MAX_REMOTE_REGIONS = 8
# A prefix leaves room for the topic name in Kafka's 249 characters.
MAX_PREFIX_CHARS = 100
REMOTE_PREFIX = re.compile(rf"[A-Za-z0-9._-]{{1,{MAX_PREFIX_CHARS}}}")
MIB = 1024 * KIB

# Binaries above this size go to the blob store once (content-addressed) and the package only
# references them; below it the extra blob round trip costs more than carrying the bytes.
DEFAULT_BINARY_THRESHOLD_BYTES = 16 * KIB
# Sling's inline package limit: a serialized package above it is spilled to the blob store and
# sent by reference, so package records stay well under Kafka's customary 1 MiB.
DEFAULT_INLINE_PACKAGE_LIMIT_BYTES = 800 * KIB
# Every package is built in memory on the publisher and read whole by every subscriber:
# 64 MiB bounds that memory while leaving room for large page trees (binaries above the
# threshold do not count, they are references).
DEFAULT_MAX_PACKAGE_BYTES = 64 * MIB
# A request body carries binaries as base64 (4/3 of their size) or multipart parts; a body
# beyond this is refused before it is parsed. 96 MiB lets a maximal package through as base64.
DEFAULT_MAX_REQUEST_BYTES = 96 * MIB
# Longest wait of a distribute request for one blob store call (storing a binary or the
# spilled package): a healthy S3 server stores a 64 MiB package in seconds, and one that stops
# answering fails the request after this (503) instead of after botocore's attempts x read
# timeout (90 s and more).
DEFAULT_BLOB_TIMEOUT_S = 30.0
# Longest wait for the offset stamp of a spilled package once it is on the log: the answer does
# not depend on it (a stamp not done is the cleanup's), and a healthy server stamps in ms.
DEFAULT_STAMP_TIMEOUT_S = 5.0
# Sling: a subscriber is alive while it announced itself within 30 s (it announces every 10 s,
# so two lost announcements are tolerated).
DEFAULT_DISCOVERY_TTL_S = 30.0
# Sling refreshes its view every 5 s: subscribers appearing/disappearing are logged, the
# minimum processed offset (events) and the per-subscriber metrics are recomputed that often.
DEFAULT_VIEW_REFRESH_S = 5.0
# One journal poll of the background readers (the queue cache's tail, the discovery and status
# pollers) waits at most this long when no record comes, which bounds how long stop() takes.
# A record ends the wait at once, so a longer poll only saves idle round trips.
DEFAULT_POLL_TIMEOUT_S = 0.1
# Sling recycles its package cache every 12 h: entries nobody needs any more are dropped.
DEFAULT_QUEUE_CACHE_RECYCLE_S = 12 * 3600.0
# Sling gives up fetching an older range of the package topic after one minute.
DEFAULT_FETCH_TIMEOUT_S = 60.0
# Sling: the package cleanup ran every 12 h; retention is counted in days, so more often buys
# nothing.
DEFAULT_CLEANUP_INTERVAL_S = 12 * 3600.0
# A spilled package blob without an offset stamp is only stamped once it is this old: any send
# still in flight (send timeout 30 s) has finished by then, so the latest offset read afterwards
# is an upper bound of the package's real offset.
DEFAULT_CLEANUP_GRACE_S = 300.0
# Sling shows a queue BLOCKED once its head item failed this many times.
DEFAULT_BLOCKED_AFTER_ATTEMPTS = 3
# How long a queue page may be; a page is built from the shared cache, so this bounds the
# response, not memory.
DEFAULT_MAX_PAGE_ITEMS = 1000
# Subscribers the publisher keeps state for (discovery view, error queues, per-queue metrics);
# beyond it the least recently announced are dropped. Sling supports up to 100 subscribers per
# publisher: 1000 leaves ample room while 50,000 forged announcements cost a bounded few MiB.
DEFAULT_MAX_SUBSCRIBERS = 1000
# Kafka's group coordinator declares a silent member dead after the session timeout; 6 s is the
# broker's default minimum (group.min.session.timeout.ms), so a killed leader is replaced in
# about 6-10 s.
DEFAULT_LEADER_SESSION_TIMEOUT_S = 6.0
# Embedded backend: how often a follower retries taking the leader file lock.
DEFAULT_LEADER_LOCK_RETRY_S = 1.0
# Sling's throttling: once an editable subscriber's queue holds more than 1000 items, distribute
# requests wait, linearly longer up to 20 s at twice that (publisher/queues/throttle.py). 1000 items
# is minutes of import backlog; 20 s slows an author down without timing out an HTTP client.
DEFAULT_THROTTLE_QUEUE_LIMIT = 1000
DEFAULT_THROTTLE_MAX_DELAY_S = 20.0

# Tokens that are clearly not secrets; refused outside dev mode.
PLACEHOLDER_TOKENS = frozenset(
    {"", "changethis", "changeme", "change-me", "secret", "token", "password", "admin", "test"}
)
# A token shorter than this is guessable; refused outside dev mode.
MIN_TOKEN_CHARS = 16


class PublisherSettings(ScdSettings):
    config_section = "publisher"
    # Read by the commands that talk to a running publisher (scd distribute, queues, ...).
    env_not_settings = frozenset({"URL"})

    # hide_input_in_errors: a validation error would otherwise repeat the input values, the
    # API token and the signing key among them.
    model_config = SettingsConfigDict(
        env_prefix="SCD_PUBLISHER_", extra="forbid", hide_input_in_errors=True
    )

    agent_name: str = Field(
        default="publish",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$",
        description="Publisher agent name (pub_agent_name on every message).",
    )
    instance_id: str = Field(
        default_factory=socket.gethostname,
        min_length=1,
        max_length=200,
        json_schema_extra={"doc_default": "the host name"},
        description="This publisher instance (pub_sling_id; 'application' of events).",
    )
    dev_mode: bool = Field(
        default=False, description="Allow a missing or placeholder API token (development)."
    )
    api_token: SecretStr | None = Field(
        default=None, description="Bearer token required by mutating endpoints."
    )
    signing_key: SecretStr | None = Field(
        default=None,
        description="Ed25519 private key that signs package and command records: a PEM file path, "
        "or base64:<raw 32-byte key> (signed records; the production setting).",
    )
    signing_key_id: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$",
        description="Id of the signing key, sent with each signed record.",
    )
    host: str = Field(default="127.0.0.1", description="address the REST API listens on")
    advertised_url: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s/?#]{1,255}(/[^\s?#]{0,200})?$",
        json_schema_extra={
            "doc_default": "`http://<host>:<port>` (the host name when the API listens on "
            "every interface)"
        },
        description="where the other instances of the agent reach this one's API: a follower "
        "forwards writing requests to the leader's "
        "([replicas](security.md#publisher-replicas))",
    )
    port: int = Field(
        default=8080,
        ge=0,
        le=65535,
        description="port of the REST API",
    )

    content_root: Path | None = Field(
        default=None, description="Directory tree ADD requests export nodes from."
    )
    binary_threshold_bytes: int = Field(
        default=DEFAULT_BINARY_THRESHOLD_BYTES,
        ge=0,
        description="binaries from this size on go to the blob store, content-addressed, and "
        "travel by reference",
    )
    inline_package_limit_bytes: int = Field(
        default=DEFAULT_INLINE_PACKAGE_LIMIT_BYTES,
        ge=1,
        description="packages above this size are spilled to the blob store and sent by reference",
    )
    blob_timeout_s: float = Field(
        default=DEFAULT_BLOB_TIMEOUT_S,
        gt=0,
        description="Longest wait of a distribute request for one blob store call.",
    )
    stamp_timeout_s: float = Field(
        default=DEFAULT_STAMP_TIMEOUT_S,
        gt=0,
        description="Longest wait for a spilled package's offset stamp before answering.",
    )
    max_package_bytes: int = Field(
        default=DEFAULT_MAX_PACKAGE_BYTES,
        ge=1,
        description="largest package, decoded (413 beyond it)",
    )
    max_request_bytes: int = Field(
        default=DEFAULT_MAX_REQUEST_BYTES,
        ge=1024,
        description="largest request body (413 beyond it, before the body is read)",
    )
    package_type: Literal["scd", "filevault"] = Field(
        default="scd",
        description="`scd`: scd's own package format (`pkgType` `scd-content`); `filevault`: "
        "binary-less Jackrabbit FileVault packages (`pkgType` `journal_filevault`) "
        "that Sling subscribers import ([filevault.md](filevault.md)). scd "
        "subscribers import both.",
    )
    package_key_prefix: str = Field(
        default="packages",
        pattern=r"^[a-z0-9][a-z0-9_.-]*$",
        description="blob-store prefix of spilled packages",
    )

    discovery_ttl_s: float = Field(
        default=DEFAULT_DISCOVERY_TTL_S,
        gt=0,
        description="a subscriber not announced for this long leaves the discovery view",
    )
    view_refresh_s: float = Field(
        default=DEFAULT_VIEW_REFRESH_S,
        gt=0,
        description="period of the discovery view, metrics and queue refresh",
    )
    poll_timeout_s: float = Field(
        default=DEFAULT_POLL_TIMEOUT_S,
        gt=0,
        description="Longest wait of one journal poll of the background readers (bounds stop).",
    )
    queue_cache_recycle_s: float = Field(
        default=DEFAULT_QUEUE_CACHE_RECYCLE_S,
        gt=0,
        description="period after which the queue cache is rebuilt from the log",
    )
    fetch_timeout_s: float = Field(
        default=DEFAULT_FETCH_TIMEOUT_S,
        gt=0,
        description="longest wait for another fetch of an older range of the package topic",
    )
    blocked_after_attempts: int = Field(
        default=DEFAULT_BLOCKED_AFTER_ATTEMPTS,
        ge=1,
        description="a queue whose head failed this many times is BLOCKED",
    )
    max_page_items: int = Field(
        default=DEFAULT_MAX_PAGE_ITEMS,
        ge=1,
        description="most items of one page of `/queues`, `/subscribers`",
    )
    aggregate_subscriber_queues: bool = Field(
        default=False,
        description="two aggregated queues (`aggregated-editable`, clearable; `aggregated-all`, "
        "read-only) instead of one per subscriber ([REST "
        "API](rest-api.md#aggregated-queues))",
    )
    max_subscribers: int = Field(
        default=DEFAULT_MAX_SUBSCRIBERS,
        ge=1,
        description="Subscribers tracked; the least recently announced beyond it are dropped.",
    )

    remote_topic_prefixes: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        max_length=MAX_REMOTE_REGIONS,
        description="Other regions' copies of the discovery and status topics the publisher reads "
        "too, as topic name prefixes, comma-separated (MirrorMaker 2's default "
        "policy: `rb.,rc.` reads `rb.<discovery topic>`, `rb.<status topic>`, ...). "
        "At most 8, each 1-100 characters of a Kafka topic name, no repeats. Their "
        "subscribers are placed by sequence number "
        "([regions.md](regions.md#the-publisher-seeing-remote-subscribers)).",
    )
    events_enabled: bool = Field(default=True, description="send distributed events (leader only)")
    cleanup_interval_s: float = Field(
        default=DEFAULT_CLEANUP_INTERVAL_S,
        gt=0,
        description="period of the blob cleanup (leader only)",
    )
    cleanup_grace_s: float = Field(
        default=DEFAULT_CLEANUP_GRACE_S,
        ge=0,
        description="spilled blobs younger than this are never deleted by the cleanup",
    )
    leader_topic: str = Field(
        default="scd.publisher.leader",
        description="one-partition topic of the leader election on Kafka, and of the leader's "
        "address announcements (both backends)",
    )
    leader_session_timeout_s: float = Field(
        default=DEFAULT_LEADER_SESSION_TIMEOUT_S,
        gt=0,
        description="a leader silent for this long loses leadership (Kafka)",
    )
    leader_lock_retry_s: float = Field(
        default=DEFAULT_LEADER_LOCK_RETRY_S,
        gt=0,
        description="how often a follower tries the leader lock (embedded journal)",
    )
    throttle_queue_limit: int = Field(
        default=DEFAULT_THROTTLE_QUEUE_LIMIT,
        ge=0,
        description="Editable subscriber queue size beyond which distribute requests are delayed "
        "(0: never).",
    )
    throttle_max_delay_s: float = Field(
        default=DEFAULT_THROTTLE_MAX_DELAY_S,
        ge=0,
        description="Delay of a distribute request once that queue is twice the limit.",
    )

    @field_validator("remote_topic_prefixes", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        return (
            [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else value
        )

    @field_validator("remote_topic_prefixes")
    @classmethod
    def _prefixes(cls, value: list[str]) -> list[str]:
        for prefix in value:
            if not REMOTE_PREFIX.fullmatch(prefix):
                raise ValueError(
                    f"remote topic prefix {prefix[:64]!r}: 1-{MAX_PREFIX_CHARS} of the "
                    "characters of a Kafka topic name (letters, digits, '.', '_', '-')"
                )
        if len(set(value)) != len(value):
            raise ValueError("remote topic prefixes are listed more than once")
        return value

    def api_url(self) -> str:
        """``advertised_url``, or the address this instance's API listens on."""
        if self.advertised_url is not None:
            return self.advertised_url.rstrip("/")
        host = socket.gethostname() if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.inline_package_limit_bytes > self.max_package_bytes:
            raise ValueError(
                "SCD_PUBLISHER_INLINE_PACKAGE_LIMIT_BYTES must not exceed "
                "SCD_PUBLISHER_MAX_PACKAGE_BYTES"
            )
        if (self.signing_key is None) != (self.signing_key_id is None):
            raise ValueError(
                "SCD_PUBLISHER_SIGNING_KEY and SCD_PUBLISHER_SIGNING_KEY_ID are set together"
            )
        if not self.dev_mode:
            token = self.api_token.get_secret_value() if self.api_token else None
            if token is None:
                raise ValueError(
                    "SCD_PUBLISHER_API_TOKEN must be set (or SCD_PUBLISHER_DEV_MODE=true for "
                    "an unauthenticated development publisher)"
                )
            if token.strip().lower() in PLACEHOLDER_TOKENS or len(token) < MIN_TOKEN_CHARS:
                raise ValueError(
                    "SCD_PUBLISHER_API_TOKEN is a placeholder or shorter than "
                    f"{MIN_TOKEN_CHARS} characters; set a real secret (or "
                    "SCD_PUBLISHER_DEV_MODE=true in development)"
                )
        return self
