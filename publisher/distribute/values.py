"""Request property values (JSON) -> typed package values (journal/wire/package.proto).

Plain JSON maps to the obvious type (string, long, double, bool, multi-value); dates and
binaries use the explicit ``{"type": ...}`` form of
:class:`publisher.distribute.request.TypedValue`. Binaries are handed to a :class:`BinarySink`,
which decides inline vs. blob store.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import BinaryIO, Protocol

from journal.content import rules
from journal.content.package import Binary, MultiValue, Node, Value
from publisher.distribute.request import PropertyValue, Scalar, TypedValue
from publisher.errors import InvalidRequest

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
DEFAULT_CONTENT_TYPE = "application/octet-stream"


class UploadedPart(Protocol):
    """A multipart upload the request refers to by name."""

    @property
    def size(self) -> int: ...

    @property
    def content_type(self) -> str | None: ...

    def open(self) -> BinaryIO:
        """The part's bytes from the start; the caller does not close it."""


# (stream, length, content type) -> Binary: inline or blob reference.
BinarySink = Callable[[BinaryIO, int, str], Binary]


def set_properties(node: Node, props: Mapping[str, Value]) -> None:
    """Copy typed values into a node (a protobuf map of messages cannot be assigned to)."""
    for name, value in props.items():
        node.properties[name].CopyFrom(value)


def content_type_of(text: str | None, name: str) -> str:
    if text is None or text == "":
        return DEFAULT_CONTENT_TYPE
    return rules.check_content_type(text, None, name)


def long_value(number: int, name: str) -> Value:
    if not INT64_MIN <= number <= INT64_MAX:
        raise InvalidRequest(f"property {name!r}: {number} does not fit a 64-bit long")
    return Value(long_value=number)


def double_value(number: float, name: str) -> Value:
    if not math.isfinite(number):
        raise InvalidRequest(f"property {name!r}: {number} is not a finite number")
    return Value(double_value=number)


def string_value(text: str, name: str) -> Value:
    rules.check_text(text, f"value of property {name!r}")
    return Value(string_value=text)


def date_value(raw: object, name: str) -> Value:
    if isinstance(raw, bool):
        raise InvalidRequest(f"property {name!r}: a date is an ISO 8601 string or epoch ms")
    if isinstance(raw, int):
        return Value(date_ms=rules.check_date_ms(long_value(raw, name).long_value, prop=name))
    if not isinstance(raw, str):
        raise InvalidRequest(f"property {name!r}: a date is an ISO 8601 string or epoch ms")
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidRequest(f"property {name!r}: {raw!r} is not an ISO 8601 date") from None
    if parsed.tzinfo is None:
        raise InvalidRequest(f"property {name!r}: date {raw!r} has no time zone (add Z or +hh:mm)")
    try:
        ms = round(parsed.timestamp() * 1000)
    except (OverflowError, ValueError):  # a year-1 date with a positive offset, for example
        ms = rules.MIN_DATE_MS - 1
    return Value(date_ms=rules.check_date_ms(ms, prop=name))


class ValueConverter:
    """Converts the properties of one request; binaries go to ``sink``."""

    def __init__(self, sink: BinarySink, parts: Mapping[str, UploadedPart] | None = None) -> None:
        self.sink = sink
        self.parts = parts or {}
        self.used_parts: set[str] = set()

    def properties(self, props: Mapping[str, PropertyValue]) -> dict[str, Value]:
        out: dict[str, Value] = {}
        for name, raw in props.items():
            rules.check_name(name)
            out[name] = self.value(raw, name)
        return out

    def value(self, raw: PropertyValue, name: str) -> Value:
        if isinstance(raw, list):
            if any(isinstance(item, TypedValue) and item.type == "binary" for item in raw):
                raise rules.ContentRuleError(
                    rules.BINARY_PLACEMENT, "a binary cannot be part of a list", prop=name
                )
            values = [self.scalar(item, name) for item in raw]
            return Value(multi_value=MultiValue(values=values))
        return self.scalar(raw, name)

    def scalar(self, raw: Scalar, name: str) -> Value:
        # bool before int: in Python a bool is an int.
        if isinstance(raw, bool):
            return Value(bool_value=raw)
        if isinstance(raw, int):
            return long_value(raw, name)
        if isinstance(raw, float):
            return double_value(raw, name)
        if isinstance(raw, str):
            return string_value(raw, name)
        return self.typed(raw, name)

    def typed(self, raw: TypedValue, name: str) -> Value:
        kind, value = raw.type, raw.value
        if kind != "binary" and (raw.base64 is not None or raw.part is not None):
            raise InvalidRequest(f"property {name!r}: 'base64'/'part' only go with type binary")
        if kind == "binary":
            return Value(binary_value=self.binary(raw, name))
        if value is None:
            raise InvalidRequest(f"property {name!r}: a {kind} value needs 'value'")
        if kind == "date":
            return date_value(value, name)
        if kind == "string" and isinstance(value, str):
            return string_value(value, name)
        if kind == "bool" and isinstance(value, bool):
            return Value(bool_value=value)
        if kind == "long" and isinstance(value, int) and not isinstance(value, bool):
            return long_value(value, name)
        if kind == "double" and isinstance(value, int | float) and not isinstance(value, bool):
            return double_value(float(value), name)
        raise InvalidRequest(f"property {name!r}: {value!r} is not a valid {kind}")

    def binary(self, raw: TypedValue, name: str) -> Binary:
        if (raw.base64 is None) == (raw.part is None):
            raise InvalidRequest(f"property {name!r}: a binary needs exactly one of base64, part")
        if raw.value is not None:
            raise InvalidRequest(f"property {name!r}: a binary takes base64 or part, not value")
        if raw.base64 is not None:
            try:
                data = base64.b64decode(raw.base64, validate=True)
            except (binascii.Error, ValueError):
                raise InvalidRequest(f"property {name!r}: 'base64' is not valid base64") from None
            content_type = content_type_of(raw.content_type, name)
            return self.sink(io.BytesIO(data), len(data), content_type)
        assert raw.part is not None
        part = self.parts.get(raw.part)
        if part is None:
            known = ", ".join(sorted(self.parts)) or "none"
            raise InvalidRequest(
                f"property {name!r}: no uploaded part named {raw.part!r} (uploaded: {known})"
            )
        self.used_parts.add(raw.part)
        content_type = content_type_of(raw.content_type or part.content_type, name)
        return self.sink(part.open(), part.size, content_type)
