"""Apache Sling's own message classes (org.apache.sling.distribution.journal.messages 0.5.12,
read and written by a default Jackson ObjectMapper as Sling's Kafka JSON sender and poller do)
read what scd writes on a sling-json journal, and scd reads what they write, field for field.
Sling's side: tests/compat/sling_json (SlingJson.java, built once by its build.sh)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import Message

from journal.failure_events import FAILURE_EVENT_TYPE
from journal.wire import messages as m
from journal.wire.headers import EXT_HEADER, MESSAGE_TYPE_HEADER, set_wire_format
from journal.wire.sling_json import DISTRIBUTED_TYPE, event_fields, event_record
from tests.compat.jvm import build_classpath, needs_jvm

BUILD = Path(__file__).parent / "sling_json" / "build.sh"

pytestmark = needs_jvm("Sling's")


@pytest.fixture(scope="module")
def classpath() -> str:
    return build_classpath(["bash", str(BUILD)])


def run_sling(classpath: str, mode: str, lines: list[dict[str, Any]] | None = None) -> list[Any]:
    done = subprocess.run(
        ["java", "-cp", classpath, "io.scd.compat.SlingJson", mode],
        input="".join(json.dumps(line) + "\n" for line in lines or []),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.fixture(autouse=True)
def sling_wire() -> Iterator[None]:
    set_wire_format("sling-json")
    yield
    set_wire_format("protobuf")


def test_scd_reads_what_sling_writes(classpath: str) -> None:
    written = run_sling(classpath, "write")
    assert {w["messageType"] for w in written} == {
        "PackageMessage",
        "PackageStatusMessage",
        "DiscoveryMessage",
        "ClearCommand",
        "LogMessage",
        "PingMessage",
        DISTRIBUTED_TYPE,
    }
    decoded: list[Message] = []
    for w in written:
        headers = {MESSAGE_TYPE_HEADER: w["messageType"]}
        value = w["value"].encode()
        if w["messageType"] == DISTRIBUTED_TYPE:
            assert event_fields(headers, value) == {
                "pubAgentName": "publish",
                "packageId": "dstrpck-1",
                "deepPaths": ["/content/a"],
                "paths": ["/content/a", "/b"],
                "offset": 7,
            }
            continue
        message = m.decode(headers, value)
        decoded.append(message)
        if w["messageType"] == "PingMessage":  # scd's ping has no field; Sling's text is null
            assert message == m.PingMessage()
            continue
        # Field for field: written back by scd, the JSON is Sling's, and nothing is left over
        # for the extension header.
        again, again_headers = m.encode(message)
        assert json.loads(again) == json.loads(value), w["messageType"]
        assert again_headers[MESSAGE_TYPE_HEADER] == w["messageType"]
        assert EXT_HEADER not in again_headers
    packages = [d for d in decoded if isinstance(d, m.PackageMessage)]
    inline, by_ref, invalidate, test_pkg = packages
    assert inline.pkg_binary == b"\x00\x01\xff"
    assert inline.req_type == m.ReqType.ADD
    assert list(inline.paths) == ["/content/a", "/content/b \u00e9"]
    assert dict(inline.metadata) == {"k": "v"}
    assert inline.pkg_id == "dstrpck-1-a,{b}"
    assert by_ref.pkg_binary == b""
    assert by_ref.pkg_binary_ref == "ref-2"
    assert by_ref.pkg_length == 5_000_000_000
    assert by_ref.req_type == m.ReqType.DELETE
    assert invalidate.req_type == m.ReqType.INVALIDATE
    assert test_pkg.req_type == m.ReqType.TEST
    statuses = [d for d in decoded if isinstance(d, m.PackageStatusMessage)]
    assert [(s.status, s.offset) for s in statuses] == [
        (m.Status.REMOVED_FAILED, 0),
        (m.Status.REMOVED, 99),
        (m.Status.IMPORTED, 1089),
    ]
    discovery = next(d for d in decoded if isinstance(d, m.DiscoveryMessage))
    assert discovery.subscriber_configuration.max_retries == -1
    assert [(s.pub_agent_name, s.offset, s.retries) for s in discovery.subscriber_state] == [
        ("publish", 41, 2),
        ("other", -1, 0),
    ]
    clear = next(d for d in decoded if isinstance(d, m.CommandMessage))
    assert clear.clear_command.offset == 12
    assert clear.pub_agent_name == "publish"


def scd_messages() -> list[Message]:
    """Every message scd sends, extensions set, and their defaults-only forms."""
    return [
        m.PackageMessage(
            pub_sling_id="pub-1",
            pub_agent_name="publish",
            pkg_id="pkg-42",
            req_type=m.ReqType.INVALIDATE,
            pkg_length=2,
            pkg_binary=b"\x01\xfe",
            paths=["/a", "/b,{c}"],
            deep_paths=["/a"],
            pkg_type="scd-content",
            user_id="admin",
            metadata={"k": "v"},
            created_ms=1_700_000_000_000,
            checksum="ab" * 32,
            sequence=41,
        ),
        m.PackageMessage(
            pub_sling_id="", pkg_id="", req_type=m.ReqType.ADD, pkg_type="", pkg_binary_ref="r"
        ),
        m.PackageStatusMessage(
            sub_sling_id="s",
            sub_agent_name="sub",
            pub_agent_name="publish",
            offset=0,
            status=m.Status.REMOVED_FAILED,
            sequence=7,
        ),
        m.DiscoveryMessage(
            sub_sling_id="s",
            sub_agent_name="sub",
            subscriber_state=[
                m.SubscriberState(pub_agent_name="a", offset=5, retries=2, sequence=3),
                m.SubscriberState(pub_agent_name="b", offset=0),
            ],
            subscriber_configuration=m.SubscriberConfiguration(editable=True, max_retries=-1),
            paused=True,
            canary_pending=["c1"],
            canary_failed=["c2"],
        ),
        m.DiscoveryMessage(
            sub_sling_id="",
            sub_agent_name="",
            subscriber_configuration=m.SubscriberConfiguration(editable=False, max_retries=0),
        ),
        m.CommandMessage(
            sub_sling_id="s",
            sub_agent_name="sub",
            pub_agent_name="publish",
            clear_command=m.ClearCommand(offset=12, sequence=9),
            sequence=4,
        ),
        m.CommandMessage(
            sub_sling_id="s",
            sub_agent_name="sub",
            pub_agent_name="publish",
            pause_command=m.PauseCommand(paused=True),
            sequence=5,
        ),
        m.LogMessage(
            pub_agent_name="publish",
            sub_sling_id="s",
            sub_agent_name="sub",
            message="failed",
            stacktrace="at x",
            offset=3,
            pkg_id="pkg-3",
            sequence=2,
        ),
        m.PingMessage(),
    ]


def test_sling_reads_what_scd_writes(classpath: str) -> None:
    messages = scd_messages()
    records = [m.encode(message) for message in messages]
    distributed = {
        "pubAgentName": "publish",
        "packageId": "pkg-42",
        "offset": 41,
        "paths": ["/a"],
        "deepPaths": [],
        "application": "pub-1",
    }
    events = [
        event_record(DISTRIBUTED_TYPE, distributed),
        event_record(FAILURE_EVENT_TYPE, {"pubAgentName": "publish"}),
    ]
    lines = [
        {"messageType": headers[MESSAGE_TYPE_HEADER], "value": value.decode()}
        for value, headers in records + events
    ]
    read = run_sling(classpath, "read", lines)
    for message, (value, headers), back in zip(messages, records, read, strict=False):
        kind = headers[MESSAGE_TYPE_HEADER]
        if kind == "PauseCommand":  # scd's extension: Sling skips the type
            assert back == {"skipped": True}
            continue
        assert "error" not in back, (kind, back)
        # Sling read every field and writes back the same JSON ...
        assert json.loads(back["value"]) == json.loads(value), kind
        # ... which, with scd's extension header, is the message scd sent.
        assert m.decode(headers, back["value"].encode()) == message
    event_back, failure_back = read[len(records) :]
    assert json.loads(event_back["value"]) == json.loads(events[0][0])
    assert "application" not in json.loads(event_back["value"])
    assert event_fields(events[0][1], event_back["value"].encode()) == distributed
    assert failure_back == {"skipped": True}


def test_the_check_can_fail(classpath: str) -> None:
    """Sling's reader refuses a field it does not know: an extension inside the JSON would lose
    the message on a Sling instance, which is why scd's go in a header."""
    value, _headers = m.encode(scd_messages()[0])
    polluted = {**json.loads(value), "sequence": 41}
    [back] = run_sling(
        classpath, "read", [{"messageType": "PackageMessage", "value": json.dumps(polluted)}]
    )
    assert "Unrecognized field" in back["error"]
