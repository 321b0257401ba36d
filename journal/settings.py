"""Typed journal settings (environment prefix ``SCD_JOURNAL_``; nested with ``__``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from journal.kafka.journal import DEFAULT_REQUEST_TIMEOUT_S, DEFAULT_SEND_TIMEOUT_S
from journal.wire.headers import WireFormat
from runtime.config import ScdSettings

HOUR_MS = 3600 * 1000
DAY_MS = 24 * HOUR_MS


class KafkaSecurity(BaseModel):
    """How clients authenticate to Kafka; rendered into librdkafka settings."""

    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        default="PLAINTEXT",
        description="how clients reach the brokers: in plain text or over TLS, with or without "
        "SASL authentication",
    )
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        default=None,
        description="SASL mechanism (a `SASL_*` protocol needs it, the user and the password)",
    )
    sasl_username: str | None = Field(default=None, description="SASL user")
    sasl_password: SecretStr | None = Field(
        default=None, description="SASL password (a secret: never logged)"
    )
    ssl_ca_location: Path | None = Field(
        default=None, description="CA certificate file that signs the brokers' certificates"
    )
    ssl_certificate_location: Path | None = Field(
        default=None, description="client certificate (mutual TLS)"
    )
    ssl_key_location: Path | None = Field(default=None, description="client key (mutual TLS)")

    @model_validator(mode="after")
    def _sasl_complete(self) -> KafkaSecurity:
        if self.protocol.startswith("SASL") and not (
            self.sasl_mechanism and self.sasl_username and self.sasl_password
        ):
            raise ValueError(
                f"security.protocol={self.protocol} needs sasl_mechanism, sasl_username and "
                "sasl_password"
            )
        return self

    def librdkafka(self) -> dict[str, str]:
        config: dict[str, str] = {"security.protocol": self.protocol}
        if self.sasl_mechanism:
            config["sasl.mechanism"] = self.sasl_mechanism
        if self.sasl_username:
            config["sasl.username"] = self.sasl_username
        if self.sasl_password:
            config["sasl.password"] = self.sasl_password.get_secret_value()
        for name in ("ssl_ca_location", "ssl_certificate_location", "ssl_key_location"):
            value = getattr(self, name)
            if value is not None:
                config[name.replace("_", ".")] = str(value)
        return config


class TopicSettings(BaseModel):
    """Topic names, partitions and retention of the journal's five topics."""

    package: str = Field(default="scd.package", description="topic of the content packages")
    status: str = Field(
        default="scd.status", description="topic of the subscribers' package statuses"
    )
    discovery: str = Field(
        default="scd.discovery", description="topic of the subscribers' announcements"
    )
    command: str = Field(default="scd.command", description="topic of the clear commands")
    event: str = Field(default="scd.event", description="topic of the distributed events")
    package_retention_ms: int = Field(
        default=7 * DAY_MS,
        gt=0,
        description="how long the package topic keeps a record (7 days): one partition, one total "
        "order of packages for every subscriber; one further behind lost packages "
        "(`SCD_SUBSCRIBER_ACCEPT_GAP`)",
    )
    discovery_retention_ms: int = Field(
        default=HOUR_MS,
        gt=0,
        description="how long the discovery topic keeps an announcement: they only matter while a "
        "subscriber is alive (TTL 30 s); an hour lets a restarting publisher rebuild "
        "its view without keeping stale announcements for long",
    )
    discovery_partitions: int = Field(
        default=4,
        ge=1,
        description="partitions of the discovery topic, keyed by subscriber agent name: several "
        "spread up to 100 subscribers",
    )
    command_partitions: int = Field(
        default=4, ge=1, description="partitions of the command topic (keyed by subscriber agent)"
    )
    event_partitions: int = Field(default=4, ge=1, description="partitions of the event topic")
    control_max_message_bytes: int = Field(
        default=64 * 1024,
        gt=0,
        description="largest record on the status, discovery and command topics (status and "
        "command records are below 100 B, announcements below 500 B: a tight limit "
        "catches bugs)",
    )


class JournalSettings(ScdSettings):
    config_section = "journal"

    model_config = SettingsConfigDict(
        env_prefix="SCD_JOURNAL_", env_nested_delimiter="__", extra="forbid"
    )

    backend: Literal["kafka", "sqlite"] = Field(
        default="sqlite",
        description="`sqlite`: one file shared by the processes of a machine (demo, tests); "
        "`kafka`: the brokers of `SCD_JOURNAL_BOOTSTRAP_SERVERS`",
    )
    bootstrap_servers: str = Field(
        default="127.0.0.1:19092", description="Kafka brokers, comma-separated"
    )
    sqlite_path: Path = Field(
        default=Path(".scd/journal.db"), description="database file of the embedded journal"
    )
    max_message_bytes: int = Field(
        default=1024 * 1024,
        ge=64 * 1024,
        description="Largest record on the package topic: Kafka's customary 1 MiB, which holds an "
        "800 KiB inline package plus its message envelope.",
    )
    send_timeout_s: float = Field(
        default=DEFAULT_SEND_TIMEOUT_S,
        gt=0,
        description="longest wait for the log to acknowledge a record; a distribute request "
        "answers 503 after it",
    )
    request_timeout_s: float = Field(
        default=DEFAULT_REQUEST_TIMEOUT_S,
        gt=0,
        description="longest wait of one broker request (metadata, offsets, admin)",
    )
    create_topics: bool = Field(
        default=True,
        description="Create missing topics at start. Off where topics are provisioned by an "
        "administrator and the daemons' credentials may not create them; then a "
        "missing topic stops the start.",
    )
    wire_format: WireFormat = Field(
        default="protobuf",
        description="The records' format, the same for every process of a deployment: `protobuf` "
        "(Sling's 0.1.x schema) or `sling-json` (Apache Sling's current JSON "
        "messages; [sling.md](sling.md)). A record of the other format is skipped and "
        "counted.",
    )
    security: KafkaSecurity = KafkaSecurity()
    topics: TopicSettings = TopicSettings()

    def client_config(self) -> dict[str, Any]:
        return dict(self.security.librdkafka())
