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

    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_ca_location: Path | None = None
    ssl_certificate_location: Path | None = None
    ssl_key_location: Path | None = None

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

    package: str = "scd.package"
    status: str = "scd.status"
    discovery: str = "scd.discovery"
    command: str = "scd.command"
    event: str = "scd.event"
    # Package topic: one partition keeps one total order of packages for every subscriber.
    package_retention_ms: int = Field(default=7 * DAY_MS, gt=0)
    # Discovery messages only matter while a subscriber is alive (TTL 30 s); an hour lets a
    # restarting publisher rebuild its view without keeping stale announcements for long.
    discovery_retention_ms: int = Field(default=HOUR_MS, gt=0)
    # Keyed by subscriber agent name: several partitions spread up to 100 subscribers.
    discovery_partitions: int = Field(default=4, ge=1)
    command_partitions: int = Field(default=4, ge=1)
    event_partitions: int = Field(default=4, ge=1)
    # Small messages (status/command < 100 B, discovery < 500 B): a tight limit catches bugs.
    control_max_message_bytes: int = Field(default=64 * 1024, gt=0)


class JournalSettings(ScdSettings):
    config_section = "journal"

    model_config = SettingsConfigDict(
        env_prefix="SCD_JOURNAL_", env_nested_delimiter="__", extra="forbid"
    )

    backend: Literal["kafka", "sqlite"] = "sqlite"
    bootstrap_servers: str = "127.0.0.1:19092"
    sqlite_path: Path = Path(".scd/journal.db")
    # Largest record on the package topic: Kafka's customary 1 MiB, which holds an 800 KiB
    # inline package plus its message envelope.
    max_message_bytes: int = Field(default=1024 * 1024, ge=64 * 1024)
    send_timeout_s: float = Field(default=DEFAULT_SEND_TIMEOUT_S, gt=0)
    request_timeout_s: float = Field(default=DEFAULT_REQUEST_TIMEOUT_S, gt=0)
    # Create missing topics at start. Off where topics are provisioned by an administrator
    # and the daemons' credentials may not create them; then a missing topic stops the start.
    create_topics: bool = True
    # The records' format, the same for every process of a deployment: scd's protobuf (Sling's
    # 0.1.x schema) or Apache Sling's current JSON messages (docs/sling.md). A record of the
    # other format is skipped and counted, never decoded.
    wire_format: WireFormat = "protobuf"
    security: KafkaSecurity = KafkaSecurity()
    topics: TopicSettings = TopicSettings()

    def client_config(self) -> dict[str, Any]:
        return dict(self.security.librdkafka())
