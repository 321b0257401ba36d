"""Errors -> HTTP statuses, with the error's own message as ``detail``.

Retriable errors (journal or blob store unreachable) answer 503 with ``Retry-After``; nothing
was put on the log, so the client may simply send the request again.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from blobstore import BlobStoreUnavailable, InvalidBlobKey, InvalidBlobMetadata
from journal.content.rules import ContentRuleError
from journal.errors import JournalUnavailable, MessageTooLarge
from publisher.errors import (
    CacheFetchTimeout,
    ContentNotFound,
    InvalidRequest,
    NotEditable,
    PackageTooLarge,
    QueueNotFound,
)
from runtime.errors import ScdError

log = logging.getLogger(__name__)

# Seconds a client should wait before retrying after a 503: a broker restart or leader
# election is over within a few seconds.
RETRY_AFTER_S = 5

STATUS: tuple[tuple[type[Exception], int], ...] = (
    (InvalidRequest, 400),
    (ContentRuleError, 400),
    (InvalidBlobKey, 400),
    (InvalidBlobMetadata, 400),
    (ContentNotFound, 404),
    (QueueNotFound, 404),
    (NotEditable, 409),
    (PackageTooLarge, 413),
    (MessageTooLarge, 413),
    (JournalUnavailable, 503),
    (BlobStoreUnavailable, 503),
    (CacheFetchTimeout, 503),
)


def status_of(exc: Exception) -> int:
    for cls, status in STATUS:
        if isinstance(exc, cls):
            return status
    return 500


async def scd_error_handler(request: Request, exc: Exception) -> JSONResponse:
    status = status_of(exc)
    headers = {"Retry-After": str(RETRY_AFTER_S)} if status == 503 else None
    if status >= 500:
        log.error("%s %s failed: %s", request.method, request.url.path, exc)
    else:
        log.info("%s %s refused (%d): %s", request.method, request.url.path, status, exc)
    body: dict[str, object] = {"detail": str(exc)}
    if isinstance(exc, PackageTooLarge | MessageTooLarge):
        body.update(size=exc.size, limit=exc.limit)
    return JSONResponse(body, status_code=status, headers=headers)


def install(app: FastAPI) -> None:
    app.add_exception_handler(ScdError, scd_error_handler)
