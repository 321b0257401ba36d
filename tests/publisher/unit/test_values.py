from __future__ import annotations

import base64
import io
from typing import Any, BinaryIO

import pytest
from pydantic import TypeAdapter

from journal.content.package import Binary
from journal.content.rules import ContentRuleError
from publisher.distribute.request import PropertyValue
from publisher.distribute.values import ValueConverter
from publisher.errors import InvalidRequest

_VALUE = TypeAdapter(PropertyValue)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[bytes, str]] = []

    def __call__(self, stream: BinaryIO, length: int, content_type: str) -> Binary:
        data = stream.read(length)
        self.calls.append((data, content_type))
        return Binary(inline=data, content_type=content_type)


def convert(raw: Any, parts: dict[str, Any] | None = None) -> Any:
    return ValueConverter(Recorder(), parts).value(_VALUE.validate_python(raw), "p")


def test_plain_json_values_map_to_their_types() -> None:
    assert convert("x").string_value == "x"
    assert convert(True).bool_value is True
    assert convert(7).long_value == 7
    assert convert(1.5).double_value == 1.5
    multi = convert(["a", 2]).multi_value.values
    assert [multi[0].string_value, multi[1].long_value] == ["a", 2]


def test_typed_values() -> None:
    assert convert({"type": "date", "value": "2024-05-01T00:00:00Z"}).date_ms == 1714521600000
    assert convert({"type": "date", "value": 5}).date_ms == 5
    assert convert({"type": "double", "value": 2}).double_value == 2.0
    assert convert({"type": "long", "value": 3}).long_value == 3
    assert convert({"type": "string", "value": "s"}).string_value == "s"
    assert convert({"type": "bool", "value": False}).bool_value is False


def test_base64_binary_goes_to_the_sink_with_its_content_type() -> None:
    sink = Recorder()
    raw = {"type": "binary", "base64": base64.b64encode(b"abc").decode(), "contentType": "a/b"}
    value = ValueConverter(sink).value(_VALUE.validate_python(raw), "p")
    assert value.binary_value.inline == b"abc"
    assert sink.calls == [(b"abc", "a/b")]


def test_uploaded_part_binary() -> None:
    class Part:
        size = 3
        content_type = "text/plain"

        def open(self) -> BinaryIO:
            return io.BytesIO(b"xyz")

    converter = ValueConverter(Recorder(), {"f.txt": Part()})
    value = converter.value(_VALUE.validate_python({"type": "binary", "part": "f.txt"}), "p")
    assert value.binary_value.inline == b"xyz"
    assert converter.used_parts == {"f.txt"}


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (2**63, "64-bit"),
        (float("nan"), "finite"),
        (float("inf"), "finite"),
        ("\ud800", "UTF-8"),
        ({"type": "date", "value": "yesterday"}, "ISO 8601"),
        ({"type": "date", "value": "2024-05-01T00:00:00"}, "time zone"),
        ({"type": "date", "value": True}, "ISO 8601"),
        ({"type": "date"}, "needs 'value'"),
        ({"type": "long", "value": "3"}, "not a valid long"),
        ({"type": "bool", "value": 1}, "not a valid bool"),
        ({"type": "string", "base64": "YQ=="}, "only go with type binary"),
        ({"type": "binary"}, "exactly one of"),
        ({"type": "binary", "base64": "YQ==", "part": "x"}, "exactly one of"),
        ({"type": "binary", "base64": "not base64!"}, "not valid base64"),
        ({"type": "binary", "base64": "YQ==", "value": "x"}, "not value"),
        ({"type": "binary", "base64": "YQ==", "contentType": "bad\ntype"}, "content type"),
        ({"type": "binary", "part": "missing"}, "no uploaded part"),
    ],
)
def test_bad_values_are_refused_with_the_reason(raw: Any, reason: str) -> None:
    with pytest.raises((InvalidRequest, ContentRuleError), match=reason):
        convert(raw)
