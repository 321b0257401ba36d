"""POST /distribute and /distribute/upload on the embedded journal: results and bad input."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from blobstore.local import LocalBlobStore
from journal.api import FencedWriter, Position
from journal.content.package import checksum, decode_package
from journal.errors import JournalUnavailable
from journal.sqlite.journal import SqliteJournal
from journal.wire.messages import PackageMessage, ReqType, decode
from publisher.agent import PublisherAgent
from publisher.api import create_app
from publisher.distribute.spill import OFFSET_METADATA
from tests.blobstore.reading import read_blob
from tests.publisher.conftest import AUTH, AgentFactory

KIB = 1024


def messages(journal: SqliteJournal, topic: str = "scd.package") -> list[PackageMessage]:
    if journal.latest_offset(topic) == 0:
        return []
    with journal.consumer(topic, Position.earliest()) as consumer:
        records = consumer.poll(0.5)
    return [decode(r.headers, r.value) for r in records]  # type: ignore[misc]


@pytest.mark.parametrize("action", ["ADD", "DELETE", "TEST", "INVALIDATE"])
def test_every_action_is_accepted_and_on_the_log_when_answered(
    client: TestClient, journal: SqliteJournal, content_root: Path, action: str
) -> None:
    (content_root / "p").write_text("x")
    response = client.post("/distribute", json={"action": action, "paths": ["/p"]})
    assert response.status_code == 200, response.text
    body = response.json()
    (message,) = messages(journal)
    assert body["offset"] == 0
    assert body["packageId"] == message.pkg_id
    assert message.req_type == ReqType.Value(action)
    assert list(message.paths) == ["/p"]
    assert message.pub_agent_name == "publish"
    assert message.checksum == checksum(message.pkg_binary)
    assert body["size"] == message.pkg_length == len(message.pkg_binary)
    assert body["spilled"] is False


def test_inline_nodes_with_base64_binary(client: TestClient, journal: SqliteJournal) -> None:
    data = os.urandom(100)
    response = client.post(
        "/distribute",
        json={
            "action": "ADD",
            "deepPaths": ["/c"],
            "nodes": [
                {"path": "/c", "properties": {"title": "t"}},
                {
                    "path": "/c/img",
                    "properties": {
                        "data": {"type": "binary", "base64": base64.b64encode(data).decode()}
                    },
                },
            ],
        },
    )
    assert response.status_code == 200, response.text
    package = decode_package(messages(journal)[0].pkg_binary)
    assert package.nodes[1].properties["data"].binary_value.inline == data


def test_multipart_upload(
    client: TestClient, journal: SqliteJournal, blobs: LocalBlobStore
) -> None:
    big = os.urandom(20 * KIB)
    request = {
        "action": "ADD",
        "paths": ["/c/doc"],
        "nodes": [{"path": "/c/doc", "properties": {"file": {"type": "binary", "part": "a.pdf"}}}],
    }
    response = client.post(
        "/distribute/upload",
        data={"request": json.dumps(request)},
        files=[("files", ("a.pdf", big, "application/pdf"))],
    )
    assert response.status_code == 200, response.text
    assert response.json()["binariesReferenced"] == 1
    ref = decode_package(messages(journal)[0].pkg_binary).nodes[0].properties["file"]
    assert ref.binary_value.ref.content_type == "application/pdf"
    assert read_blob(blobs, ref.binary_value.ref.key) == big


@pytest.mark.parametrize(
    ("files", "request_json", "status", "reason"),
    [
        ([], "{not json", 422, ""),
        ([], '{"action": "MOVE", "paths": ["/a"]}', 422, ""),
        (
            [("files", ("x", b"1", "a/b"))],
            '{"action": "ADD", "paths": ["/c"]}',
            400,
            "not referenced",
        ),
        (
            [("files", ("x", b"1", "a/b")), ("files", ("x", b"2", "a/b"))],
            '{"action": "ADD", "paths": ["/c"], "nodes": [{"path": "/c"}]}',
            400,
            "two uploaded parts",
        ),
    ],
)
def test_bad_multipart_requests(
    client: TestClient, files: list[Any], request_json: str, status: int, reason: str
) -> None:
    response = client.post("/distribute/upload", data={"request": request_json}, files=files)
    assert response.status_code == status, response.text
    assert reason in str(response.json()["detail"])


def test_spilled_package_is_stored_by_reference_and_stamped(
    make_agent: AgentFactory, journal: SqliteJournal, blobs: LocalBlobStore, content_root: Path
) -> None:
    agent = make_agent(
        content_root=content_root,
        binary_threshold_bytes=10**6,
        inline_package_limit_bytes=800 * KIB,
    )
    (content_root / "big.bin").write_bytes(os.urandom(900 * KIB))
    client = TestClient(create_app(agent), headers=AUTH)
    body = client.post("/distribute", json={"action": "ADD", "paths": ["/big.bin"]}).json()
    assert body["spilled"] is True
    assert body["size"] > 800 * KIB
    (message,) = messages(journal)
    assert message.pkg_binary == b""
    assert message.pkg_binary_ref == body["blobKey"]
    stored = read_blob(blobs, message.pkg_binary_ref)
    assert checksum(stored) == message.checksum
    assert len(stored) == message.pkg_length
    assert blobs.head(message.pkg_binary_ref).metadata[OFFSET_METADATA] == str(body["offset"])


def test_package_over_the_maximum_is_refused_with_413_and_nothing_written(
    make_agent: AgentFactory, journal: SqliteJournal, blobs: LocalBlobStore, content_root: Path
) -> None:
    agent = make_agent(
        content_root=content_root,
        binary_threshold_bytes=10**6,
        inline_package_limit_bytes=100 * KIB,
        max_package_bytes=200 * KIB,
    )
    (content_root / "big.bin").write_bytes(os.urandom(300 * KIB))
    client = TestClient(create_app(agent), headers=AUTH)
    response = client.post("/distribute", json={"action": "ADD", "paths": ["/big.bin"]})
    assert response.status_code == 413
    body = response.json()
    assert body["limit"] == 200 * KIB
    assert body["size"] > 200 * KIB
    assert "maximum package size" in body["detail"]
    assert messages(journal) == []
    assert list(blobs.list("packages/")) == []


def test_message_over_the_topic_limit_is_refused_with_413(client: TestClient) -> None:
    paths = [f"/content/{'x' * 200}/{i}" for i in range(6000)]
    response = client.post("/distribute", json={"action": "DELETE", "paths": paths})
    assert response.status_code == 413
    assert "exceeds" in response.json()["detail"]


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        ({"action": "ADD", "paths": []}, 400, "at least one path"),
        ({"action": "DELETE"}, 400, "at least one path"),
        ({"action": "PURGE", "paths": ["/a"]}, 422, "ADD"),
        ({"paths": ["/a"]}, 422, "action"),
        ({"action": "DELETE", "paths": ["/a/../../etc/passwd"]}, 400, "traversal"),
        ({"action": "DELETE", "paths": ["/a\u0000"]}, 400, "control"),
        ({"action": "DELETE", "paths": ["/\udcff"]}, 400, "UTF-8"),
        ({"action": "DELETE", "paths": "/a"}, 422, "list"),
        ({"action": "DELETE", "paths": ["/a"], "extra": 1}, 422, "extra"),
        ({"action": "ADD", "paths": ["/missing"]}, 404, "does not exist"),
    ],
)
def test_bad_distribute_requests_get_4xx_with_a_clear_message(
    client: TestClient, journal: SqliteJournal, body: dict[str, Any], status: int, reason: str
) -> None:
    # Sent as ASCII JSON: escapes carry lone surrogates that UTF-8 cannot.
    response = client.post(
        "/distribute", content=json.dumps(body), headers={"content-type": "application/json"}
    )
    assert response.status_code == status, response.text
    assert reason.lower() in str(response.json()["detail"]).lower()
    assert messages(journal) == []


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (b"{not json", "application/json"),
        (b'{"action": "ADD", "paths": ["/\xff\xfe"]}', "application/json"),
        (b"\xff\xfe\x00garbage", "application/json"),
        (b"action=ADD", "application/x-www-form-urlencoded"),
        (b"", "application/json"),
    ],
)
def test_malformed_bodies_get_4xx(client: TestClient, content: bytes, content_type: str) -> None:
    response = client.post("/distribute", content=content, headers={"content-type": content_type})
    assert 400 <= response.status_code < 500, response.text
    assert response.json()["detail"]


def test_oversized_body_is_refused_before_parsing(make_agent: AgentFactory) -> None:
    client = TestClient(create_app(make_agent(max_request_bytes=4096)), headers=AUTH)
    response = client.post("/distribute", json={"action": "DELETE", "paths": ["/" + "a" * 5000]})
    assert response.status_code == 413
    assert "exceeds the limit of 4096 bytes" in response.json()["detail"]


def test_oversized_chunked_body_is_refused(make_agent: AgentFactory) -> None:
    client = TestClient(create_app(make_agent(max_request_bytes=4096)), headers=AUTH)

    def chunks() -> Iterator[bytes]:
        yield b'{"action": "DELETE", "paths": ["/'
        for _ in range(10):
            yield b"a" * 1000
        yield b'"]}'

    response = client.post(
        "/distribute", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413


def test_small_chunked_body_is_accepted(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"action": "DELETE", '
        yield b'"paths": ["/a"]}'

    response = client.post(
        "/distribute", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "x"}])
def test_mutating_endpoints_need_the_token(agent: PublisherAgent, headers: dict[str, str]) -> None:
    client = TestClient(create_app(agent), headers=headers)
    for path, body in [
        ("/distribute", {"action": "DELETE", "paths": ["/a"]}),
        ("/queues/x/clear", {"mode": "all"}),
        ("/cleanup", None),
    ]:
        response = client.post(path, json=body)
        assert response.status_code == 401, (path, response.text)
        assert response.headers["www-authenticate"] == "Bearer"
    assert client.get("/queues").status_code == 200


def test_dev_mode_without_token_needs_no_auth(make_agent: AgentFactory) -> None:
    agent = make_agent(dev_mode=True, api_token=None)
    client = TestClient(create_app(agent))
    assert client.post("/distribute", json={"action": "TEST", "paths": ["/"]}).status_code == 200


def test_journal_outage_answers_503_and_leaves_no_unaccounted_blob(
    make_agent: AgentFactory,
    journal: SqliteJournal,
    blobs: LocalBlobStore,
    content_root: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent = make_agent(
        content_root=content_root,
        binary_threshold_bytes=10**6,
        inline_package_limit_bytes=10 * KIB,
        cleanup_grace_s=3600,  # the leader's periodic cleanup leaves the orphan alone
    )
    (content_root / "f").write_bytes(os.urandom(20 * KIB))
    client = TestClient(create_app(agent), headers=AUTH)

    def unavailable(*args: Any, **kwargs: Any) -> FencedWriter:
        raise JournalUnavailable("Kafka at 127.0.0.1:1 is unreachable")

    monkeypatch.setattr(agent.distributor.journal, "fenced_writer", unavailable)
    response = client.post("/distribute", json={"action": "ADD", "paths": ["/f"]})
    assert response.status_code == 503
    assert "unreachable" in response.json()["detail"]
    assert response.headers["retry-after"]
    monkeypatch.undo()
    assert messages(journal) == []
    (orphan,) = list(blobs.list("packages/"))
    assert OFFSET_METADATA not in orphan.metadata

    # The journal is back: requests succeed again, and the cleanup accounts for the orphan.
    ok = client.post("/distribute", json={"action": "ADD", "paths": ["/f"]})
    assert ok.status_code == 200, ok.text
    agent.cleanup.grace_s = 0
    result = client.post("/cleanup").json()
    # The leader's own first cleanup may run in between and stamp it first: either way the
    # orphan is stamped exactly once and nothing is deleted.
    assert result["deleted"] == 0
    assert agent.metrics.cleanup_stamped._value.get() == 1
    stamped = blobs.head(orphan.key).metadata[OFFSET_METADATA]
    assert int(stamped) == journal.latest_offset("scd.package")


@pytest.mark.parametrize(
    ("value", "rule", "text"),
    [
        (["a", 1], "multi-value-type", "long and string"),
        ({"type": "date", "value": "10000-01-01T00:00:00Z"}, None, "ISO 8601"),
        ({"type": "date", "value": 253_402_300_800_000}, "date-range", "outside"),
        ({"type": "date", "value": "0001-01-01T00:00:00+01:00"}, "date-range", "outside"),
        ([{"type": "binary", "base64": "YQ=="}], "binary-placement", "list"),
    ],
)
def test_content_breaking_a_rule_is_refused_with_400_naming_node_property_and_rule(
    client: TestClient, journal: SqliteJournal, value: Any, rule: str | None, text: str
) -> None:
    """The issue's wedge: content a subscriber's store cannot hold was accepted with 200 and
    then retried forever by every default subscriber. Now the publisher refuses it."""
    body = {"action": "ADD", "paths": ["/p"], "nodes": [{"path": "/p", "properties": {"m": value}}]}
    response = client.post("/distribute", json=body)
    assert response.status_code == 400, response.text
    detail = response.json()["detail"]
    assert "'/p'" in detail
    assert "'m'" in detail
    assert text in detail
    if rule is not None:
        assert f"rule {rule}" in detail
    assert messages(journal) == []  # nothing reached the log
