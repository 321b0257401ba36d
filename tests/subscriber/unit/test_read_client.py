"""subscriber/reads/client.py: the read API's node documents back as stored nodes, every value
type intact, so `scd content --url` prints what `scd content` prints from the store."""

from __future__ import annotations

from typing import Any

import pytest

from subscriber.content import property_json
from subscriber.reads.client import ReadApiError, ReadApiSource, stored_node

PROPERTIES: dict[str, Any] = {
    "title": "a, b {c}",
    "count": 5,
    "ratio": 1.5,
    "whole": 2.0,
    "flag": True,
    "off": False,
    "when": {"type": "date", "value": "2026-12-02T01:00:00.000Z"},
    "tags": ["x", "y"],
    "numbers": [1, 2],
    "empty": [],
}


def test_every_value_type_survives_the_round_trip() -> None:
    doc = {
        "path": "/site/p",
        "offset": 7,
        "packageId": "pkg",
        "properties": {
            **PROPERTIES,
            "jcr:data": {
                "type": "binary",
                "size": 3,
                "sha256": "ab" * 32,
                "contentType": "image/png",
                "url": "/binaries/site/p?property=jcr%3Adata",
            },
        },
    }
    node = stored_node(doc)
    assert (node.path, node.offset, node.pkg_id) == ("/site/p", 7, "pkg")
    assert {name: property_json(*p) for name, p in node.properties.items()} == PROPERTIES
    assert node.properties["count"][0] == "long"
    assert node.properties["whole"][0] == "double"
    assert node.properties["flag"][0] == "bool"
    (binary,) = node.binaries.values()
    assert binary.blob_key == "/binaries/site/p?property=jcr%3Adata"
    assert (binary.size, binary.sha256, binary.content_type) == (3, "ab" * 32, "image/png")


def test_an_unreachable_api_is_a_read_api_error() -> None:
    with ReadApiSource("http://127.0.0.1:1") as source, pytest.raises(ReadApiError) as caught:
        source.node("/site")
    assert "http://127.0.0.1:1/content/site" in str(caught.value)
