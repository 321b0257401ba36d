"""The sling-json wire format against hostile records: every one is refused with a DecodeError
(or skipped as an unknown or foreign type), never an exception of another kind, and a poller
counts it and goes on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from journal.api import Position, TopicSpec
from journal.errors import ForeignWireFormat, UnknownMessageType
from journal.messaging import MessagePoller
from journal.settings import JournalSettings
from journal.sqlite.journal import SqliteJournal
from journal.wire import messages as m
from journal.wire import sling_json
from journal.wire.headers import (
    EXT_HEADER,
    MESSAGE_TYPE_HEADER,
    set_wire_format,
    wire_format,
)
from journal.wire.signing import RecordSigner
from runtime.errors import DecodeError

STATUS = {
    "subSlingId": "s",
    "subAgentName": "sub",
    "pubAgentName": "publish",
    "offset": 5,
    "status": "IMPORTED",
}
PACKAGE = {"pubSlingId": "p", "reqType": "ADD", "pkgId": "i", "pkgType": "t"}
DISCOVERY = {
    "subSlingId": "s",
    "subAgentName": "sub",
    "subscriberConfiguration": {"editable": False, "maxRetries": 3},
    "subscriberStates": [{"pubAgentName": "publish", "offset": 1, "retries": 0}],
}


@pytest.fixture(autouse=True)
def sling_wire() -> Iterator[None]:
    set_wire_format("sling-json")
    yield
    set_wire_format("protobuf")


def decode(kind: str, value: Any, **headers: str) -> Any:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return m.decode({MESSAGE_TYPE_HEADER: kind, **headers}, raw)


def test_a_valid_record_decodes() -> None:
    status = decode("PackageStatusMessage", STATUS, **{EXT_HEADER: '{"sequence":9}'})
    assert status == m.PackageStatusMessage(
        sub_sling_id="s",
        sub_agent_name="sub",
        pub_agent_name="publish",
        offset=5,
        status=m.Status.IMPORTED,
        sequence=9,
    )


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        # huge, deep, not JSON, not an object
        ("PackageStatusMessage", b" " * (sling_json.MAX_JSON_BYTES + 1)),
        ("PackageStatusMessage", b"[" * 100_000 + b"]" * 100_000),
        ("PackageStatusMessage", {**STATUS, "subSlingId": {"a": [[[[[[[[[[[]]]]]]]]]]]}}),
        ("PackageStatusMessage", b"\xff\xfe not utf-8"),
        ("PackageStatusMessage", b"{'single': 'quotes'}"),
        ("PackageStatusMessage", [STATUS]),
        ("PackageStatusMessage", "text"),
        ("PackageStatusMessage", b'{"offset": 1' + b"0" * 5000 + b"}"),  # int too long to parse
        # wrong types
        ("PackageStatusMessage", {**STATUS, "offset": "5"}),
        ("PackageStatusMessage", {**STATUS, "offset": True}),
        ("PackageStatusMessage", {**STATUS, "offset": 1.5}),
        ("PackageStatusMessage", {**STATUS, "offset": 2**63}),
        ("PackageStatusMessage", {**STATUS, "status": 2}),
        ("PackageStatusMessage", {**STATUS, "status": "DONE"}),
        ("PackageStatusMessage", {**STATUS, "subAgentName": 7}),
        ("PackageMessage", {**PACKAGE, "pkgBinary": "not base64!"}),
        ("PackageMessage", {**PACKAGE, "pkgBinary": [1, 2]}),
        ("PackageMessage", {**PACKAGE, "paths": ["/a", 1]}),
        ("PackageMessage", {**PACKAGE, "paths": "/a"}),
        ("PackageMessage", {**PACKAGE, "metadata": {"k": 1}}),
        ("PackageMessage", {**PACKAGE, "reqType": "add"}),
        ("PackageMessage", {**PACKAGE, "pkgId": "\ud800"}),  # a lone surrogate
        ("DiscoveryMessage", {**DISCOVERY, "subscriberConfiguration": []}),
        ("DiscoveryMessage", {**DISCOVERY, "subscriberStates": {"pubAgentName": "p"}}),
        ("DiscoveryMessage", {**DISCOVERY, "subscriberConfiguration": {"maxRetries": 2**31}}),
        ("ClearCommand", {"subSlingId": "s", "subAgentName": "a", "offset": None}),
        # missing required fields
        ("PackageMessage", {k: v for k, v in PACKAGE.items() if k != "pkgId"}),
        ("PackageMessage", {k: v for k, v in PACKAGE.items() if k != "reqType"}),
        ("PackageStatusMessage", {k: v for k, v in STATUS.items() if k != "offset"}),
        (
            "DiscoveryMessage",
            {k: v for k, v in DISCOVERY.items() if k != "subscriberConfiguration"},
        ),
        ("DiscoveryMessage", {**DISCOVERY, "subscriberStates": [{"pubAgentName": "p"}]}),
        ("ClearCommand", {"subSlingId": "s", "subAgentName": "a"}),
        ("PauseCommand", {"subSlingId": "s", "subAgentName": "a"}),
    ],
)
def test_hostile_json_is_refused(kind: str, value: Any) -> None:
    with pytest.raises(DecodeError):
        decode(kind, value)


@pytest.mark.parametrize(
    "ext",
    [
        "not json",
        "[1]",
        '{"sequence": "9"}',
        '{"sequence": -1e400}',
        " " * (sling_json.MAX_EXT_BYTES + 1),
    ],
)
def test_hostile_extension_header_is_refused(ext: str) -> None:
    with pytest.raises(DecodeError):
        decode("PackageStatusMessage", STATUS, **{EXT_HEADER: ext})


def test_state_sequences_must_match_the_states() -> None:
    with pytest.raises(DecodeError, match="stateSequences"):
        decode("DiscoveryMessage", DISCOVERY, **{EXT_HEADER: '{"stateSequences":[1,2]}'})


def test_unknown_fields_are_ignored_as_from_a_newer_sling() -> None:
    status = decode("PackageStatusMessage", {**STATUS, "newField": {"x": 1}})
    assert status.offset == 5


def test_unknown_or_missing_message_type() -> None:
    with pytest.raises(UnknownMessageType):
        decode("DistributionEvent", STATUS)
    with pytest.raises(UnknownMessageType):
        m.decode({}, json.dumps(STATUS).encode())


def test_type_header_must_agree_with_message_type() -> None:
    """A signature binds the ``type`` header: a record may not claim another messageType."""
    with pytest.raises(DecodeError, match="type header"):
        decode("ClearCommand", {"subSlingId": "s", "subAgentName": "a", "offset": 1}, type="X")


def protobuf_record() -> tuple[bytes, dict[str, str]]:
    set_wire_format("protobuf")
    try:
        return m.encode(
            m.PackageMessage(pub_sling_id="p", pkg_id="i", req_type=m.ReqType.ADD, pkg_type="t")
        )
    finally:
        set_wire_format("sling-json")


def test_protobuf_on_a_json_deployment_is_foreign() -> None:
    value, headers = protobuf_record()
    with pytest.raises(ForeignWireFormat):
        m.decode(headers, value)
    # Protobuf bytes under a messageType header are simply not JSON.
    with pytest.raises(DecodeError):
        m.decode({MESSAGE_TYPE_HEADER: "PackageMessage"}, value)


def test_json_on_a_protobuf_deployment_is_foreign() -> None:
    value, headers = m.encode(m.PingMessage())
    set_wire_format("protobuf")
    with pytest.raises(ForeignWireFormat):
        m.decode(headers, value)


def test_extensions_survive_and_stay_out_of_the_json() -> None:
    message = m.CommandMessage(
        sub_sling_id="s",
        sub_agent_name="a",
        clear_command=m.ClearCommand(offset=3, sequence=8),
        sequence=2,
    )
    value, headers = m.encode(message)
    assert json.loads(value) == {
        "subSlingId": "s",
        "subAgentName": "a",
        "pubAgentName": None,
        "offset": 3,
    }
    assert json.loads(headers[EXT_HEADER]) == {"sequence": 2, "clearSequence": 8}
    assert m.decode(headers, value) == message


def test_signature_binds_the_extension_header() -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    signer = RecordSigner("k1", Ed25519PrivateKey.generate())
    message = m.PackageMessage(
        pub_sling_id="p", pkg_id="i", req_type=m.ReqType.ADD, pkg_type="t", sequence=4
    )
    value, headers = m.encode(message)
    signed = signer.signed_headers("pkg", headers, value)
    assert signer.verifier().verify("pkg", signed, value) == "k1"
    replayed = {**signed, EXT_HEADER: '{"sequence":5}'}
    with pytest.raises(DecodeError):
        signer.verifier().verify("pkg", replayed, value)


def test_the_setting_chooses_the_format(tmp_path: Path) -> None:
    set_wire_format("protobuf")
    settings = JournalSettings(sqlite_path=tmp_path / "j.db", wire_format="sling-json")
    from journal.factory import open_journal

    with open_journal(settings):
        assert wire_format() == "sling-json"
    with pytest.raises(ValueError, match="wire_format"):
        JournalSettings(wire_format="xml")  # type: ignore[arg-type]


def test_a_poller_skips_and_counts_what_it_cannot_read(tmp_path: Path) -> None:
    seen: list[Any] = []
    with SqliteJournal(tmp_path / "j.db") as journal:
        journal.create_topics([TopicSpec("status")])
        value, headers = protobuf_record()
        journal.send("status", value, headers=headers)
        journal.send("status", b"[" * 100_000, headers={MESSAGE_TYPE_HEADER: "PackageMessage"})
        journal.send("status", b"{}", headers={MESSAGE_TYPE_HEADER: "SomethingNew"})
        good = m.PackageStatusMessage(
            sub_sling_id="s",
            sub_agent_name="a",
            pub_agent_name="p",
            offset=1,
            status=m.Status.IMPORTED,
        )
        value, headers = m.encode(good)
        journal.send("status", value, headers=headers)
        poller = MessagePoller(
            journal,
            "status",
            Position.earliest(),
            {m.PackageStatusMessage: lambda message, _: seen.append(message)},
        )
        try:
            while poller.poll_once():
                pass
        finally:
            poller.stop()
    assert seen == [good]
    assert poller.counts == {
        "foreign_format": 1,
        "undecodable": 1,
        "unknown_type": 1,
        "delivered": 1,
    }
