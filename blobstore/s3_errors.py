"""Translation of botocore failures into blob store errors that name endpoint and bucket."""

from __future__ import annotations

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionError,
    HTTPClientError,
    IncompleteReadError,
    NoCredentialsError,
    PartialCredentialsError,
)

from blobstore.errors import (
    BlobNotFound,
    BlobStoreAccessDenied,
    BlobStoreError,
    BlobStoreUnavailable,
)

NOT_FOUND_CODES = frozenset({"NoSuchKey", "NotFound", "404"})

DENIED_CODES = frozenset(
    {
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidToken",
        "ExpiredToken",
        "403",
        # versitygw's answer (HTTP 404) to an access key it does not know.
        "XAdminUserNotFound",
    }
)

UNAVAILABLE_CODES = frozenset(
    {"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "500", "503"}
)

# Any 5xx is the server's problem and may pass; retrying can help.
FIRST_SERVER_ERROR_STATUS = 500


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def translate(
    error: Exception, *, endpoint: str, bucket: str, key: str | None
) -> BlobStoreError | None:
    """The blob store error for a botocore failure, or None if ``error`` is not one."""
    if isinstance(error, ClientError):
        return _translate_client_error(error, endpoint=endpoint, bucket=bucket, key=key)
    if isinstance(error, ConnectionError | HTTPClientError | IncompleteReadError):
        return BlobStoreUnavailable(endpoint, bucket, str(error))
    if isinstance(error, NoCredentialsError | PartialCredentialsError):
        return BlobStoreAccessDenied(endpoint, bucket, str(error))
    if isinstance(error, BotoCoreError):
        return BlobStoreError(f"blob store at {endpoint} (bucket {bucket!r}): {error}")
    return None


def _translate_client_error(
    error: ClientError, *, endpoint: str, bucket: str, key: str | None
) -> BlobStoreError:
    code = error_code(error)
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
    message = error.response.get("Error", {}).get("Message", "")
    detail = f"{code} (HTTP {status}): {message}".rstrip(": ")
    if code == "NoSuchBucket":
        return BlobStoreError(
            f"bucket {bucket!r} does not exist at {endpoint} "
            "(create it, or set SCD_BLOB_CREATE_BUCKET=true)"
        )
    if code in NOT_FOUND_CODES and key is not None:
        return BlobNotFound(key)
    if code in DENIED_CODES or status == 403:
        return BlobStoreAccessDenied(endpoint, bucket, detail)
    if code in UNAVAILABLE_CODES or status >= FIRST_SERVER_ERROR_STATUS:
        return BlobStoreUnavailable(endpoint, bucket, detail)
    target = f" for key {key!r}" if key else ""
    return BlobStoreError(
        f"blob store at {endpoint} (bucket {bucket!r}) refused the request{target}: {detail}"
    )
