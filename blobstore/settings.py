"""Blob store configuration, read from ``SCD_BLOB_*`` environment variables."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from runtime.config import ScdSettings

MIB = 1024 * 1024

# S3 refuses multipart parts smaller than 5 MiB (except the last one), so neither the part size
# nor the threshold that switches to multipart may go below it.
S3_MIN_PART_BYTES = 5 * MIB

# S3's upper limit for one part.
S3_MAX_PART_BYTES = 5 * 1024 * MIB

# Below this size an object goes up in one PUT: multipart costs two extra round trips
# (create + complete) that only pay off once there are several parts to send in parallel.
# Same value as the AWS CLI and boto3 defaults, which S3-compatible servers are tuned for.
DEFAULT_MULTIPART_THRESHOLD_BYTES = 8 * MIB

# Each part in flight is held in memory (the upload reads streams that cannot seek), so the
# part size bounds memory per upload; 8 MiB keeps that small while 10,000 parts (the S3
# maximum) still cover 78 GiB. Larger objects get larger parts automatically.
DEFAULT_MULTIPART_CHUNK_BYTES = 8 * MIB

# Establishing a TCP connection to a healthy S3 endpoint takes milliseconds; 2 s leaves room
# for one lost SYN (Linux retransmits after 1 s) yet makes a dead endpoint fail fast.
DEFAULT_CONNECT_TIMEOUT_S = 2.0

# Longest silence tolerated while sending a part or waiting for a response; large parts on a
# busy server can take several seconds to be acknowledged.
DEFAULT_READ_TIMEOUT_S = 30.0

# Attempts per request including the first. Three absorb a transient failure (throttling, a
# reset connection); botocore waits only tens of milliseconds between attempts on connection
# errors, so a dead host is reported after about 3 x connect timeout = 6 s, and a refused
# connection at once.
DEFAULT_MAX_ATTEMPTS = 3


class BlobStoreSettings(ScdSettings):
    config_section = "blobstore"

    """Where blobs live: an S3-compatible bucket or a local directory."""

    model_config = SettingsConfigDict(env_prefix="SCD_BLOB_")

    backend: Literal["s3", "local"] = Field(
        default="local",
        description="`local`: a directory (`SCD_BLOB_LOCAL_ROOT`); `s3`: an S3 bucket",
    )
    local_root: Path | None = Field(
        default=None, description="Directory of the local backend (created if missing)."
    )
    endpoint_url: str | None = Field(
        default=None, description="S3 endpoint, e.g. http://127.0.0.1:9000; unset: AWS."
    )
    bucket: str = Field(
        default="scd-blobs",
        pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
        description="S3 bucket name (3-63 lower-case letters, digits, '.', '-').",
    )
    region: str = Field(default="us-east-1", description="S3 region")
    access_key: str | None = Field(default=None, description="S3 access key")
    secret_key: SecretStr | None = Field(
        default=None,
        description="S3 secret key (a secret: never logged, and never on a command line: the "
        "subscriber sets it in its Spark JVM once it runs, as it does for its fold "
        "worker, since `ps` shows a JVM's Spark settings to every local user)",
    )
    multipart_threshold_bytes: int = Field(
        default=DEFAULT_MULTIPART_THRESHOLD_BYTES,
        ge=S3_MIN_PART_BYTES,
        description="uploads from this size on are multipart",
    )
    multipart_chunk_bytes: int = Field(
        default=DEFAULT_MULTIPART_CHUNK_BYTES,
        ge=S3_MIN_PART_BYTES,
        le=S3_MAX_PART_BYTES,
        description="size of one part of a multipart upload",
    )
    connect_timeout_s: float = Field(
        default=DEFAULT_CONNECT_TIMEOUT_S,
        gt=0,
        description="longest wait to connect to S3, per attempt",
    )
    read_timeout_s: float = Field(
        default=DEFAULT_READ_TIMEOUT_S,
        gt=0,
        description="longest wait for an S3 answer, per attempt",
    )
    max_attempts: int = Field(
        default=DEFAULT_MAX_ATTEMPTS,
        ge=1,
        description="attempts per S3 request (a dead endpoint fails after about attempts x "
        "connect timeout)",
    )
    create_bucket: bool = Field(
        default=False, description="Create the bucket when opening the store if it is missing."
    )

    @model_validator(mode="after")
    def _check_backend_settings(self) -> Self:
        if self.backend == "local" and self.local_root is None:
            raise ValueError("SCD_BLOB_LOCAL_ROOT must be set when SCD_BLOB_BACKEND=local")
        if (self.access_key is None) != (self.secret_key is None):
            raise ValueError(
                "SCD_BLOB_ACCESS_KEY and SCD_BLOB_SECRET_KEY must be set together "
                "(or both left unset to use the default AWS credential chain)"
            )
        return self
