"""A distribute request: what to distribute (action, paths) and, optionally, the nodes.

This is both the REST body of ``POST /distribute`` and the builder's input. Pydantic checks the
shape (an unknown action or a wrong type is refused with 422); the package builder checks the
meaning (empty paths, ``..``, nodes outside the paths: 400).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from journal.wire.messages import ReqType


class Action(StrEnum):
    ADD = "ADD"
    DELETE = "DELETE"
    TEST = "TEST"
    INVALIDATE = "INVALIDATE"

    @property
    def req_type(self) -> int:
        return int(ReqType.Value(self.value))

    @classmethod
    def from_req_type(cls, req_type: int) -> Action:
        return cls(ReqType.Name(req_type))


class TypedValue(BaseModel):
    """A property value whose JSON form is ambiguous: a date, a binary, or an explicit type.

    * ``{"type": "date", "value": "2024-05-01T12:00:00Z"}`` (or epoch milliseconds)
    * ``{"type": "binary", "base64": "...", "contentType": "image/png"}``
    * ``{"type": "binary", "part": "photo.jpg"}`` - an uploaded part (multipart requests)
    * ``{"type": "long", "value": 3}``, ``"double"``, ``"string"``, ``"bool"``
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    type: Literal["string", "long", "double", "bool", "date", "binary"]
    value: str | int | float | bool | None = None
    base64: str | None = None
    part: str | None = None
    content_type: str | None = Field(default=None, alias="contentType")


Scalar = str | bool | int | float | TypedValue
PropertyValue = Scalar | list[Scalar]


class NodeSpec(BaseModel):
    """One node carried by the request itself (instead of exported from the content source)."""

    model_config = ConfigDict(extra="forbid")

    path: str
    properties: dict[str, PropertyValue] = Field(default_factory=dict)


class DistributeRequest(BaseModel):
    """``paths`` are distributed shallow (the node only), ``deepPaths`` with their subtree."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    action: Action
    paths: list[str] = Field(default_factory=list)
    deep_paths: list[str] = Field(default_factory=list, alias="deepPaths")
    nodes: list[NodeSpec] = Field(default_factory=list)
    metadata: dict[str, str] = Field(default_factory=dict)
    user_id: str | None = Field(default=None, alias="userId")
