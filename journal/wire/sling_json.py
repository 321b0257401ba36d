"""Apache Sling's JSON journal messages (SLING-9504: org.apache.sling.distribution.journal.messages
0.2.0 and later) <-> scd's journal messages.

A record's value is what Jackson (a default ``ObjectMapper``) writes for Sling's message class,
field for field: the names, enums by name, ``byte[]`` as base64, unset optional texts as
``null``. Its ``messageType`` header names the class. Sling's reader fails on a field it does
not know, so scd's extensions (sequence numbers, checksum, pause, canaries, ...) travel in the
``scd-ext`` header as a JSON object; Sling ignores headers it does not read. The mapping is in
docs/sling.md. A record refused here raises DecodeError (UnknownMessageType for a message type
scd does not know): readers skip and count it, as any undecodable record.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from typing import Any

from google.protobuf.message import Message

from journal.errors import JournalError, UnknownMessageType
from journal.wire.headers import (
    EXT_HEADER,
    MESSAGE_TYPE_HEADER,
    TYPE_HEADER,
    VERSION_HEADER,
    WIRE_VERSION,
    json_headers,
    wire_format,
)
from journal.wire.journal_pb2 import (
    ClearCommand,
    CommandMessage,
    DiscoveryMessage,
    LogMessage,
    PackageMessage,
    PackageStatusMessage,
    PauseCommand,
    PingMessage,
    ReqType,
    Status,
    SubscriberConfiguration,
    SubscriberState,
)
from runtime.errors import DecodeError

# A JSON record above this is refused unparsed: a topic's largest record (1 MiB by default)
# with room to spare, so that parsing never holds more than a few times it in objects.
MAX_JSON_BYTES = 16 * 1024 * 1024
MAX_EXT_BYTES = 64 * 1024
# The Java types of Sling's fields: long and int.
INT64 = (-(2**63), 2**63 - 1)
INT32 = (-(2**31), 2**31 - 1)

# Sling's message class (messageType) -> scd's message type (the ``type`` header).
SCD_TYPES: dict[str, str] = {
    "PackageMessage": "PackageMessage",
    "PackageStatusMessage": "PackageStatusMessage",
    "DiscoveryMessage": "DiscoveryMessage",
    "ClearCommand": "CommandMessage",
    "LogMessage": "LogMessage",
    "PingMessage": "PingMessage",
    # scd's extension: Sling has no pause command and skips the type.
    "PauseCommand": "CommandMessage",
}

Json = dict[str, Any]


def encode(message: Message) -> tuple[bytes, dict[str, str]]:
    """The Sling JSON of a journal message and its headers."""
    name = message.DESCRIPTOR.name
    encoder = _ENCODERS.get(name)
    if encoder is None:
        raise JournalError(f"{name} is not a journal message type")
    sling_type, fields, ext = encoder(message)
    headers = {TYPE_HEADER: name, VERSION_HEADER: WIRE_VERSION, MESSAGE_TYPE_HEADER: sling_type}
    ext = {k: v for k, v in ext.items() if v}
    if ext:
        headers[EXT_HEADER] = _dumps(ext)
    return _dumps(fields).encode(), headers


def decode(headers: Mapping[str, str], value: bytes) -> Message:
    """The journal message of a Sling JSON record; UnknownMessageType or DecodeError."""
    sling_type = headers.get(MESSAGE_TYPE_HEADER)
    if sling_type is None:
        raise UnknownMessageType(f"record has no {MESSAGE_TYPE_HEADER!r} header")
    decoder = _DECODERS.get(sling_type)
    if decoder is None:
        raise UnknownMessageType(f"unknown messageType {sling_type[:100]!r}")
    scd_type = headers.get(TYPE_HEADER)
    if scd_type is not None and scd_type != SCD_TYPES[sling_type]:
        raise DecodeError(f"messageType {sling_type} with type header {scd_type[:100]!r}")
    fields = _Fields(sling_type, _object(sling_type, value, MAX_JSON_BYTES))
    ext_text = headers.get(EXT_HEADER)
    ext = _Fields(
        f"{sling_type} {EXT_HEADER}",
        {} if ext_text is None else _object(EXT_HEADER, ext_text.encode(), MAX_EXT_BYTES),
    )
    try:
        return decoder(fields, ext)
    except (ValueError, TypeError) as exc:  # a text protobuf refuses (lone surrogates)
        raise DecodeError(f"undecodable {sling_type}: {type(exc).__name__}: {exc}") from None


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _object(what: str, value: bytes, limit: int) -> Json:
    if len(value) > limit:
        raise DecodeError(f"{what} of {len(value)} bytes (at most {limit})")
    try:
        raw = json.loads(value)
    except (ValueError, RecursionError) as exc:  # RecursionError: "[[[[..." nested too deep
        raise DecodeError(f"{what} is not JSON: {type(exc).__name__}") from None
    if not isinstance(raw, dict):
        raise DecodeError(f"{what} is a JSON {type(raw).__name__}, not an object")
    return raw


def _b64(data: bytes) -> str | None:
    return base64.b64encode(data).decode("ascii") if data else None


class _Fields:
    """Typed access to one JSON object; every mistake a DecodeError naming the field.
    Fields it does not know are ignored (a newer Sling may add some)."""

    def __init__(self, where: str, raw: Json) -> None:
        self.where = where
        self.raw = raw

    def _get(self, key: str, required: bool) -> Any:
        value = self.raw.get(key)
        if value is None and required:
            raise DecodeError(f"{self.where}: required field {key} missing")
        return value

    def _wrong(self, key: str, what: str) -> DecodeError:
        return DecodeError(f"{self.where}: {key} is not {what}")

    def text(self, key: str, required: bool = False) -> str:
        value = self._get(key, required)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self._wrong(key, "a string")
        return value

    def integer(self, key: str, bounds: tuple[int, int] = INT64, required: bool = False) -> int:
        value = self._get(key, required)
        if value is None:
            return 0
        # bool is an int subclass; Jackson writes Java's long and int as JSON integers.
        if type(value) is not int:
            raise self._wrong(key, "an integer")
        if not bounds[0] <= value <= bounds[1]:
            raise DecodeError(f"{self.where}: {key} {value} outside [{bounds[0]}, {bounds[1]}]")
        return value

    def boolean(self, key: str, required: bool = False) -> bool:
        value = self._get(key, required)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise self._wrong(key, "a boolean")
        return value

    def texts(self, key: str) -> list[str]:
        value = self._get(key, False)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._wrong(key, "a list of strings")
        return value

    def integers(self, key: str) -> list[int]:
        value = self._get(key, False)
        if value is None:
            return []
        if not isinstance(value, list) or not all(
            type(v) is int and INT64[0] <= v <= INT64[1] for v in value
        ):
            raise self._wrong(key, "a list of integers")
        return value

    def text_map(self, key: str) -> dict[str, str]:
        value = self._get(key, False)
        if value is None:
            return {}
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise self._wrong(key, "an object of strings")
        return value

    def data(self, key: str) -> bytes:
        value = self.text(key)
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise self._wrong(key, "base64") from None

    def enum(self, key: str, names: frozenset[str]) -> str:
        """The name of an enum value (Jackson writes Java enums by name)."""
        value = self.text(key, required=True)
        if value not in names:
            raise DecodeError(f"{self.where}: unknown {key} {value[:40]!r}")
        return value

    def child(self, key: str, required: bool = False) -> _Fields:
        value = self._get(key, required)
        if value is not None and not isinstance(value, dict):
            raise self._wrong(key, "an object")
        return _Fields(f"{self.where}.{key}", value or {})

    def children(self, key: str) -> list[_Fields]:
        value = self._get(key, False)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self._wrong(key, "a list of objects")
        return [_Fields(f"{self.where}.{key}[{i}]", v) for i, v in enumerate(value)]


# ---------------------------------------------------------------- encoding

Encoded = tuple[str, Json, Json]


def _package(m: PackageMessage) -> Encoded:
    fields = {
        "pubSlingId": m.pub_sling_id,
        "reqType": ReqType.Name(m.req_type),
        "pkgId": m.pkg_id,
        "pkgType": m.pkg_type,
        "pkgLength": m.pkg_length,
        "pkgBinary": _b64(m.pkg_binary),
        "pkgBinaryRef": m.pkg_binary_ref or None,
        "pubAgentName": m.pub_agent_name or None,
        "userId": m.user_id or None,
        "paths": list(m.paths),
        "deepPaths": list(m.deep_paths),
        "metadata": dict(m.metadata),
    }
    ext = {"createdMs": m.created_ms, "checksum": m.checksum, "sequence": m.sequence}
    return "PackageMessage", fields, ext


def _status(m: PackageStatusMessage) -> Encoded:
    fields = {
        "subSlingId": m.sub_sling_id,
        "subAgentName": m.sub_agent_name,
        "pubAgentName": m.pub_agent_name,
        "offset": m.offset,
        "status": Status.Name(m.status),
    }
    return "PackageStatusMessage", fields, {"sequence": m.sequence}


def _discovery(m: DiscoveryMessage) -> Encoded:
    config = m.subscriber_configuration
    fields = {
        "subSlingId": m.sub_sling_id,
        "subAgentName": m.sub_agent_name,
        "subscriberConfiguration": {"editable": config.editable, "maxRetries": config.max_retries},
        "subscriberStates": [
            {"pubAgentName": s.pub_agent_name, "offset": s.offset, "retries": s.retries}
            for s in m.subscriber_state
        ],
    }
    sequences = [s.sequence for s in m.subscriber_state]
    ext = {
        "paused": m.paused,
        "canaryPending": list(m.canary_pending),
        "canaryFailed": list(m.canary_failed),
        # One per subscriber state, in order; left out when none is numbered.
        "stateSequences": sequences if any(sequences) else [],
    }
    return "DiscoveryMessage", fields, ext


def _command(m: CommandMessage) -> Encoded:
    names = {
        "subSlingId": m.sub_sling_id,
        "subAgentName": m.sub_agent_name,
        "pubAgentName": m.pub_agent_name or None,
    }
    if m.HasField("clear_command"):
        if m.HasField("pause_command"):
            raise JournalError("a CommandMessage is a clear or a pause command, not both")
        ext = {"sequence": m.sequence, "clearSequence": m.clear_command.sequence}
        return "ClearCommand", {**names, "offset": m.clear_command.offset}, ext
    if m.HasField("pause_command"):
        return "PauseCommand", {**names, "paused": m.pause_command.paused}, {"sequence": m.sequence}
    raise JournalError("a CommandMessage without a command has no Sling JSON")


def _log(m: LogMessage) -> Encoded:
    fields = {
        "pubAgentName": m.pub_agent_name,
        "subSlingId": m.sub_sling_id,
        "subAgentName": m.sub_agent_name,
        "message": m.message,
        "stacktrace": m.stacktrace or None,
    }
    return "LogMessage", fields, {"offset": m.offset, "pkgId": m.pkg_id, "sequence": m.sequence}


def _ping(_: PingMessage) -> Encoded:
    return "PingMessage", {"message": None}, {}


_ENCODERS: dict[str, Callable[[Any], Encoded]] = {
    "PackageMessage": _package,
    "PackageStatusMessage": _status,
    "DiscoveryMessage": _discovery,
    "CommandMessage": _command,
    "LogMessage": _log,
    "PingMessage": _ping,
}

# ---------------------------------------------------------------- decoding

_REQ_TYPES = frozenset(ReqType.keys())
_STATUSES = frozenset(Status.keys())


def _read_package(f: _Fields, ext: _Fields) -> Message:
    return PackageMessage(
        pub_sling_id=f.text("pubSlingId", required=True),
        req_type=f.enum("reqType", _REQ_TYPES),
        pkg_id=f.text("pkgId", required=True),
        pkg_type=f.text("pkgType", required=True),
        pkg_length=f.integer("pkgLength"),
        pkg_binary=f.data("pkgBinary"),
        pkg_binary_ref=f.text("pkgBinaryRef"),
        pub_agent_name=f.text("pubAgentName"),
        user_id=f.text("userId"),
        paths=f.texts("paths"),
        deep_paths=f.texts("deepPaths"),
        metadata=f.text_map("metadata"),
        created_ms=ext.integer("createdMs"),
        checksum=ext.text("checksum"),
        sequence=ext.integer("sequence"),
    )


def _read_status(f: _Fields, ext: _Fields) -> Message:
    return PackageStatusMessage(
        sub_sling_id=f.text("subSlingId", required=True),
        sub_agent_name=f.text("subAgentName", required=True),
        pub_agent_name=f.text("pubAgentName", required=True),
        offset=f.integer("offset", required=True),
        status=f.enum("status", _STATUSES),
        sequence=ext.integer("sequence"),
    )


def _read_discovery(f: _Fields, ext: _Fields) -> Message:
    config = f.child("subscriberConfiguration", required=True)
    states = f.children("subscriberStates")
    sequences = ext.integers("stateSequences")
    if sequences and len(sequences) != len(states):
        raise DecodeError(
            f"{ext.where}: {len(sequences)} stateSequences for {len(states)} subscriberStates"
        )
    return DiscoveryMessage(
        sub_sling_id=f.text("subSlingId", required=True),
        sub_agent_name=f.text("subAgentName", required=True),
        subscriber_configuration=SubscriberConfiguration(
            editable=config.boolean("editable", required=True),
            max_retries=config.integer("maxRetries", INT32, required=True),
        ),
        subscriber_state=[
            SubscriberState(
                pub_agent_name=s.text("pubAgentName", required=True),
                offset=s.integer("offset", required=True),
                retries=s.integer("retries", INT32),
                sequence=sequences[i] if sequences else 0,
            )
            for i, s in enumerate(states)
        ],
        paused=ext.boolean("paused"),
        canary_pending=ext.texts("canaryPending"),
        canary_failed=ext.texts("canaryFailed"),
    )


def _command_names(f: _Fields, ext: _Fields) -> CommandMessage:
    return CommandMessage(
        sub_sling_id=f.text("subSlingId", required=True),
        sub_agent_name=f.text("subAgentName", required=True),
        pub_agent_name=f.text("pubAgentName"),
        sequence=ext.integer("sequence"),
    )


def _read_clear(f: _Fields, ext: _Fields) -> Message:
    command = _command_names(f, ext)
    command.clear_command.CopyFrom(
        ClearCommand(
            offset=f.integer("offset", required=True), sequence=ext.integer("clearSequence")
        )
    )
    return command


def _read_pause(f: _Fields, ext: _Fields) -> Message:
    command = _command_names(f, ext)
    command.pause_command.CopyFrom(PauseCommand(paused=f.boolean("paused", required=True)))
    return command


def _read_log(f: _Fields, ext: _Fields) -> Message:
    return LogMessage(
        pub_agent_name=f.text("pubAgentName"),
        sub_sling_id=f.text("subSlingId"),
        sub_agent_name=f.text("subAgentName"),
        message=f.text("message"),
        stacktrace=f.text("stacktrace"),
        offset=ext.integer("offset"),
        pkg_id=ext.text("pkgId"),
        sequence=ext.integer("sequence"),
    )


def _read_ping(f: _Fields, _: _Fields) -> Message:
    f.text("message")  # Sling's ping carries a text scd does not use
    return PingMessage()


_DECODERS: dict[str, Callable[[_Fields, _Fields], Message]] = {
    "PackageMessage": _read_package,
    "PackageStatusMessage": _read_status,
    "DiscoveryMessage": _read_discovery,
    "ClearCommand": _read_clear,
    "PauseCommand": _read_pause,
    "LogMessage": _read_log,
    "PingMessage": _read_ping,
}


# ---------------------------------------------------------------- events (JSON on both formats)

# The fields of Sling's PackageDistributedMessage: on a sling-json deployment, the rest of scd's
# event (its ``application``) travels in the ext header.
DISTRIBUTED_FIELDS = frozenset({"pubAgentName", "packageId", "offset", "paths", "deepPaths"})
DISTRIBUTED_TYPE = "PackageDistributedMessage"


def event_record(type_name: str, event: Mapping[str, Any]) -> tuple[bytes, dict[str, str]]:
    """The value and headers of an event record of scd's (JSON on either wire format)."""
    headers = json_headers(type_name)
    fields = dict(event)
    if wire_format() == "sling-json" and type_name == DISTRIBUTED_TYPE:
        ext = {k: v for k, v in fields.items() if k not in DISTRIBUTED_FIELDS}
        fields = {k: v for k, v in fields.items() if k in DISTRIBUTED_FIELDS}
        if ext:
            headers[EXT_HEADER] = _dumps(ext)
    return _dumps(fields).encode(), headers


def event_fields(headers: Mapping[str, str], value: bytes) -> Any:
    """The JSON of an event record, its ext header's fields merged in; ValueError if either is
    not JSON."""
    event = json.loads(value)
    ext_text = headers.get(EXT_HEADER)
    if isinstance(event, dict) and ext_text is not None and len(ext_text) <= MAX_EXT_BYTES:
        ext = json.loads(ext_text)
        if isinstance(ext, dict):
            event = {**ext, **event}
    return event
