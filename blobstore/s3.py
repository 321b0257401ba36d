"""Blob store on an S3-compatible server (AWS S3, MinIO, versitygw, Ceph RGW)."""

from __future__ import annotations

import io
import logging
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC
from typing import TYPE_CHECKING, Any, BinaryIO

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from blobstore.api import BlobInfo, BlobStore
from blobstore.errors import BlobNotFound, BlobStoreError
from blobstore.keys import validate_key, validate_prefix
from blobstore.metadata import DEFAULT_CONTENT_TYPE, validate_content_type, validate_metadata
from blobstore.s3_errors import error_code, translate
from blobstore.settings import BlobStoreSettings
from blobstore.streams import ExactLengthReader

if TYPE_CHECKING:
    from botocore.response import StreamingBody
    from types_boto3_s3.client import S3Client

logger = logging.getLogger(__name__)

# S3 allows at most this many parts in one multipart upload; objects too large for the
# configured part size get proportionally larger parts.
S3_MAX_PARTS = 10_000

# S3 copies at most 5 GiB in one CopyObject, which is how metadata is rewritten.
S3_MAX_COPY_BYTES = 5 * 1024**3

# Parts of one upload sent in parallel: enough to fill a LAN link to the store without
# starving other uploads of the shared connection pool.
UPLOAD_CONCURRENCY = 4

# Parts read ahead of the network per upload (streams are read into memory part by part).
# With the parts being sent, one upload holds about six parts: ~50 MiB with 8 MiB parts.
UPLOAD_BUFFERED_PARTS = 4

# HTTP connections kept per store: a few concurrent uploads of UPLOAD_CONCURRENCY parts each,
# plus the small requests (head, list, delete) running beside them.
MAX_POOL_CONNECTIONS = 20

# A metadata rewrite (copy onto itself) is conditional on the object not having changed since
# it was read; this many tries ride out a concurrent overwrite.
SET_METADATA_ATTEMPTS = 3

_US_EAST_1 = "us-east-1"

# botocore's own default pool size, for clients that make one request at a time.
BOTOCORE_DEFAULT_POOL = 10


def s3_client(
    settings: BlobStoreSettings,
    *,
    max_attempts: int | None = None,
    max_pool_connections: int = BOTOCORE_DEFAULT_POOL,
) -> S3Client:
    """The one way scd builds an S3 client: path-style addressing (MinIO, versitygw and Ceph
    need it), the endpoint, credentials and timeouts of ``settings``. ``max_attempts``
    overrides the settings' attempts for callers that must fail fast (the writer lease)."""
    secret = settings.secret_key.get_secret_value() if settings.secret_key else None
    client: S3Client = boto3.session.Session().client(
        "s3",
        endpoint_url=settings.endpoint_url,
        region_name=settings.region,
        aws_access_key_id=settings.access_key,
        aws_secret_access_key=secret,
        config=Config(
            s3={"addressing_style": "path"},
            connect_timeout=settings.connect_timeout_s,
            read_timeout=settings.read_timeout_s,
            retries={
                "total_max_attempts": max_attempts or settings.max_attempts,
                "mode": "standard",
            },
            max_pool_connections=max_pool_connections,
        ),
    )
    return client


class S3BlobStore(BlobStore):
    """Objects in one bucket, addressed path-style (``http://host/bucket/key``)."""

    def __init__(self, settings: BlobStoreSettings) -> None:
        self._client = s3_client(settings, max_pool_connections=MAX_POOL_CONNECTIONS)
        self._bucket = settings.bucket
        self._region = settings.region
        self._endpoint = self._client.meta.endpoint_url
        self._multipart_threshold = settings.multipart_threshold_bytes
        self._multipart_chunk = settings.multipart_chunk_bytes

    @property
    def client(self) -> S3Client:
        """The underlying boto3 client (for instrumentation; prefer the store's methods)."""
        return self._client

    @property
    def bucket(self) -> str:
        return self._bucket

    @property
    def endpoint(self) -> str:
        return self._endpoint

    def ensure_bucket(self) -> None:
        """Create the bucket if it does not exist yet (safe against a concurrent creator)."""
        with self._errors(None):
            try:
                self._client.head_bucket(Bucket=self._bucket)
                return
            except ClientError as e:
                if error_code(e) not in ("404", "NoSuchBucket", "NotFound"):
                    raise
            try:
                if self._region == _US_EAST_1:
                    self._client.create_bucket(Bucket=self._bucket)
                else:
                    self._client.create_bucket(
                        Bucket=self._bucket,
                        CreateBucketConfiguration={"LocationConstraint": self._region},  # type: ignore[typeddict-item]
                    )
                logger.info("created bucket %s at %s", self._bucket, self._endpoint)
            except ClientError as e:
                if error_code(e) != "BucketAlreadyOwnedByYou":
                    raise

    def put(
        self,
        key: str,
        stream: BinaryIO,
        length: int,
        *,
        metadata: Mapping[str, str] | None = None,
        content_type: str | None = None,
    ) -> BlobInfo:
        validate_key(key)
        extra_args = {
            "Metadata": validate_metadata(metadata),
            "ContentType": validate_content_type(content_type),
        }
        with self._errors(key):
            self._client.upload_fileobj(
                ExactLengthReader(stream, length),  # type: ignore[arg-type]
                self._bucket,
                key,
                ExtraArgs=extra_args,
                Config=self._transfer_config(length),
            )
        info = self._head(key)
        if info.size != length:
            raise BlobStoreError(
                f"blob store at {self._endpoint} (bucket {self._bucket!r}) holds "
                f"{info.size} bytes for {key!r} after an upload of {length}"
            )
        logger.debug("stored %s (%d bytes) in bucket %s", key, length, self._bucket)
        return info

    def get(self, key: str) -> AbstractContextManager[BinaryIO]:
        validate_key(key)
        return self._open(key)

    @contextmanager
    def _open(self, key: str) -> Iterator[BinaryIO]:
        with self._errors(key):
            response = self._client.get_object(Bucket=self._bucket, Key=key)
        body = response["Body"]
        try:
            yield io.BufferedReader(_ResponseStream(body, lambda e: self._translate(e, key)))
        finally:
            body.close()

    def head(self, key: str) -> BlobInfo:
        validate_key(key)
        return self._head(key)

    def delete(self, key: str) -> None:
        validate_key(key)
        with self._errors(key):
            try:
                self._client.delete_object(Bucket=self._bucket, Key=key)
            except ClientError as e:
                if error_code(e) not in ("NoSuchKey", "404"):
                    raise

    def list(self, prefix: str = "") -> Iterator[BlobInfo]:
        # Listings carry no user metadata, so each object is described by a HEAD of its own.
        validate_prefix(prefix)
        paginator = self._client.get_paginator("list_objects_v2")
        with self._errors(None):
            for page in paginator.paginate(Bucket=self._bucket, Prefix=prefix):
                for entry in page.get("Contents", []):
                    try:
                        yield self._head(entry["Key"])
                    except BlobNotFound:
                        logger.debug("blob %s deleted while listing %r", entry["Key"], prefix)

    def set_metadata(self, key: str, metadata: Mapping[str, str]) -> BlobInfo:
        validate_key(key)
        validate_metadata(metadata)
        for _ in range(SET_METADATA_ATTEMPTS):
            head = self._head_object(key)
            merged = validate_metadata({**head["Metadata"], **metadata})
            content_type = head.get("ContentType", DEFAULT_CONTENT_TYPE)
            if head["ContentLength"] > S3_MAX_COPY_BYTES:
                raise BlobStoreError(
                    f"cannot set metadata of {key!r}: objects above {S3_MAX_COPY_BYTES} bytes "
                    "cannot be copied onto themselves in one request"
                )
            with self._errors(key):
                try:
                    response = self._client.copy_object(
                        Bucket=self._bucket,
                        Key=key,
                        CopySource={"Bucket": self._bucket, "Key": key},
                        CopySourceIfMatch=head["ETag"],
                        MetadataDirective="REPLACE",
                        Metadata=merged,
                        ContentType=content_type,
                    )
                except ClientError as e:
                    if error_code(e) != "PreconditionFailed":
                        raise
                    logger.info("%s changed while its metadata was set; trying again", key)
                    continue
            last_modified = response["CopyObjectResult"]["LastModified"].astimezone(UTC)
            return BlobInfo(key, head["ContentLength"], last_modified, content_type, merged)
        raise BlobStoreError(
            f"{key!r} kept changing while its metadata was set "
            f"({SET_METADATA_ATTEMPTS} attempts); try again"
        )

    def close(self) -> None:
        self._client.close()

    def _head(self, key: str) -> BlobInfo:
        head = self._head_object(key)
        return BlobInfo(
            key=key,
            size=head["ContentLength"],
            last_modified=head["LastModified"].astimezone(UTC),
            content_type=head.get("ContentType", DEFAULT_CONTENT_TYPE),
            metadata=dict(head["Metadata"]),
        )

    def _head_object(self, key: str) -> Any:
        try:
            with self._errors(key):
                return self._client.head_object(Bucket=self._bucket, Key=key)
        except BlobNotFound:
            self._explain_not_found(key)
            raise

    def _explain_not_found(self, key: str) -> None:
        """Raise the real cause behind a HEAD 404, if it is not the key that is missing.

        A HEAD response has no body, so its 404 cannot tell a missing key from a missing bucket
        (or, on some servers, an unknown access key). A GET returns the error code that does.
        """
        with self._errors(key):
            response = self._client.get_object(Bucket=self._bucket, Key=key)
        # The object appeared since the HEAD; report the HEAD's answer all the same.
        response["Body"].close()

    def _transfer_config(self, length: int) -> TransferConfig:
        chunk = max(self._multipart_chunk, math.ceil(length / S3_MAX_PARTS))
        config = TransferConfig(
            multipart_threshold=self._multipart_threshold,
            multipart_chunksize=chunk,
            max_concurrency=UPLOAD_CONCURRENCY,
            use_threads=True,
            preferred_transfer_client="classic",
        )
        config.max_in_memory_upload_chunks = UPLOAD_BUFFERED_PARTS
        return config

    def _translate(self, error: Exception, key: str | None) -> BlobStoreError | None:
        return translate(error, endpoint=self._endpoint, bucket=self._bucket, key=key)

    @contextmanager
    def _errors(self, key: str | None) -> Iterator[None]:
        try:
            yield
        except (ClientError, BotoCoreError) as e:
            translated = self._translate(e, key)
            if translated is None:
                raise
            raise translated from e


class _ResponseStream(io.RawIOBase):
    """A GET response body as a raw stream whose transport errors are blob store errors."""

    def __init__(
        self,
        body: StreamingBody,
        translate_error: Callable[[Exception], BlobStoreError | None],
    ) -> None:
        super().__init__()
        self._body = body
        self._translate_error = translate_error

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        try:
            data = self._body.read(len(buffer))
        except BotoCoreError as e:
            translated = self._translate_error(e)
            if translated is None:
                raise
            raise translated from e
        view = memoryview(buffer).cast("B")
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._body.close()
        super().close()
