"""subscriber/reads/client.py: the read API's node documents back as stored nodes, every value
type intact, so `scd content --url` prints what `scd content` prints from the store; a hostile
or broken server costs a bounded amount of memory and time."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from subscriber.content import property_json
from subscriber.errors import ReadApiError
from subscriber.reads import client
from subscriber.reads.client import ReadApiSource, stored_node

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


class _Hostile(BaseHTTPRequestHandler):
    """Answers every GET the way the test's ``mode`` says: an endless body, a body dripped a
    few bytes at a time, or a Content-Length far over the client's bound."""

    mode = "endless"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if self.mode == "huge-length":
            self.send_header("Content-Length", str(1 << 40))
        self.end_headers()
        chunk = b'{"path": "/site", "padding": "' + b"x" * 65536
        try:
            while True:
                if self.mode == "drip":
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.05)
                else:
                    self.wfile.write(chunk)
        except OSError:
            return  # the client gave up: what the test expects

    def log_message(self, *_args: Any) -> None:
        return


@pytest.fixture
def hostile() -> Iterator[tuple[str, type[_Hostile]]]:
    handler = type("Handler", (_Hostile,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_an_endless_answer_is_cut_at_the_bound(
    hostile: tuple[str, type[_Hostile]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, handler = hostile
    handler.mode = "endless"
    monkeypatch.setattr(client, "MAX_ANSWER_BYTES", 4 * 1024 * 1024)
    start = time.monotonic()
    with ReadApiSource(url) as source, pytest.raises(ReadApiError, match="over 4194304 bytes"):
        source.node("/site")
    assert time.monotonic() - start < 10


def test_an_announced_huge_answer_is_refused_before_its_body(
    hostile: tuple[str, type[_Hostile]],
) -> None:
    url, handler = hostile
    handler.mode = "huge-length"
    with ReadApiSource(url) as source, pytest.raises(ReadApiError, match="1099511627776 bytes"):
        source.nodes("/site")


def test_a_dripping_answer_ends_at_the_deadline(
    hostile: tuple[str, type[_Hostile]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each read of the body arrives within the per-read timeout, so only the whole answer's
    deadline ends it."""
    url, handler = hostile
    handler.mode = "drip"
    monkeypatch.setattr(client, "ANSWER_DEADLINE_S", 1.0)
    start = time.monotonic()
    with ReadApiSource(url) as source, pytest.raises(ReadApiError, match=r"took over 1\.0 s"):
        source.node("/site")
    assert time.monotonic() - start < 5
