"""POST /distribute (JSON) and POST /distribute/upload (multipart with binary parts).

Both return only once the package is on the log, with the offset it got.
"""

from __future__ import annotations

import os
from typing import Annotated, BinaryIO

from fastapi import APIRouter, File, Form, UploadFile
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from publisher.api.deps import AgentDep, Authorized
from publisher.api.models import DistributeResponse
from publisher.distribute.request import DistributeRequest
from publisher.distribute.values import UploadedPart
from publisher.errors import InvalidRequest

router = APIRouter(tags=["distribute"], dependencies=[Authorized])

ERRORS: dict[int | str, dict[str, str]] = {
    400: {"description": "Invalid paths, nodes or values (the message says which)"},
    401: {"description": "Missing or invalid API token"},
    404: {"description": "A path to export does not exist in the content source"},
    413: {"description": "Request body or package larger than the configured maximum"},
    503: {"description": "Journal or blob store unreachable: nothing was distributed, retry"},
}


@router.post("/distribute", responses=ERRORS)
def distribute(request: DistributeRequest, agent: AgentDep) -> DistributeResponse:
    """Distribute paths: ADD (with nodes from the request or the content source), DELETE, TEST
    or INVALIDATE."""
    return DistributeResponse.of(agent.distributor.distribute(request))


class _Part:
    """An uploaded multipart file as the package builder reads it."""

    def __init__(self, upload: UploadFile) -> None:
        self.upload = upload
        stream = upload.file
        stream.seek(0, os.SEEK_END)
        self._size = stream.tell()
        stream.seek(0)

    @property
    def size(self) -> int:
        return self._size

    @property
    def content_type(self) -> str | None:
        return self.upload.content_type

    def open(self) -> BinaryIO:
        self.upload.file.seek(0)
        return self.upload.file


@router.post("/distribute/upload", responses=ERRORS)
def distribute_upload(
    agent: AgentDep,
    request: Annotated[str, Form(description="The distribute request as JSON")],
    files: Annotated[
        list[UploadFile],
        File(description="Binary parts, referenced as {'type': 'binary', 'part': <filename>}"),
    ] = [],  # noqa: B006 - FastAPI reads the default, never mutates it
) -> DistributeResponse:
    """Distribute with binaries uploaded as multipart parts instead of base64."""
    try:
        parsed = DistributeRequest.model_validate_json(request)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors(include_url=False)) from None
    parts: dict[str, UploadedPart] = {}
    for upload in files:
        name = upload.filename or ""
        if not name:
            raise InvalidRequest("every uploaded part needs a filename to be referenced by")
        if name in parts:
            raise InvalidRequest(f"two uploaded parts are named {name!r}")
        parts[name] = _Part(upload)
    return DistributeResponse.of(agent.distributor.distribute(parsed, parts))
