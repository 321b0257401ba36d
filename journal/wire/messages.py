"""Journal message codec: protobuf message <-> (bytes, headers).

Every record carries a ``type`` header naming its message type and a ``version`` header, so
one topic can hold several message types and a reader skips types it does not know. The value
is the protobuf message, or on a ``sling-json`` deployment (journal/wire/headers.py) Apache
Sling's JSON of it (journal/wire/sling_json.py); a record of the other format is skipped as
ForeignWireFormat.
"""

from __future__ import annotations

from collections.abc import Mapping

from google.protobuf.message import DecodeError as ProtobufDecodeError
from google.protobuf.message import Message

from journal.errors import ForeignWireFormat, JournalError, UnknownMessageType
from journal.wire import sling_json
from journal.wire.headers import (
    MESSAGE_TYPE_HEADER,
    TYPE_HEADER,
    VERSION_HEADER,
    WIRE_VERSION,
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

__all__ = [
    "MESSAGE_TYPES",
    "TYPE_HEADER",
    "VERSION_HEADER",
    "WIRE_VERSION",
    "ClearCommand",
    "CommandMessage",
    "DiscoveryMessage",
    "LogMessage",
    "PackageMessage",
    "PackageStatusMessage",
    "PauseCommand",
    "PingMessage",
    "ReqType",
    "Status",
    "SubscriberConfiguration",
    "SubscriberState",
    "decode",
    "encode",
    "missing_required",
    "type_name",
]

MESSAGE_TYPES: dict[str, type[Message]] = {
    cls.DESCRIPTOR.name: cls
    for cls in (
        PackageMessage,
        PackageStatusMessage,
        DiscoveryMessage,
        CommandMessage,
        PingMessage,
        LogMessage,
    )
}

# Fields Apache Sling's proto2 schema marks `required`. Its decoders refuse a message without
# them, so they are always set (explicit presence), even when they hold the default value.
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "PackageMessage": ("pub_sling_id", "pkg_id", "req_type", "pkg_type"),
    "PackageStatusMessage": (
        "sub_sling_id",
        "sub_agent_name",
        "pub_agent_name",
        "offset",
        "status",
    ),
    "SubscriberState": ("pub_agent_name", "offset"),
    "SubscriberConfiguration": ("editable", "max_retries"),
    "DiscoveryMessage": ("sub_sling_id", "sub_agent_name", "subscriber_configuration"),
    "ClearCommand": ("offset",),
    "CommandMessage": ("sub_sling_id", "sub_agent_name"),
}


def type_name(message_class: type[Message]) -> str:
    """The ``type`` header value for a message class."""
    return str(message_class.DESCRIPTOR.name)


def missing_required(message: Message, prefix: str = "") -> list[str]:
    """Dotted names of Sling-required fields that are not set, nested messages included."""
    missing: list[str] = []
    name = message.DESCRIPTOR.name
    for required in REQUIRED_FIELDS.get(name, ()):
        if not message.HasField(required):
            missing.append(f"{prefix}{name}.{required}")
    for field, value in message.ListFields():
        if field.message_type is None or field.message_type.GetOptions().map_entry:
            continue
        children = value if field.is_repeated else [value]
        for child in children:
            missing.extend(missing_required(child, f"{prefix}{name}.{field.name}/"))
    return missing


def encode(message: Message) -> tuple[bytes, dict[str, str]]:
    """Serialize a journal message; returns the bytes and the headers to send with them."""
    name = message.DESCRIPTOR.name
    if name not in MESSAGE_TYPES:
        raise JournalError(f"{name} is not a journal message type")
    missing = missing_required(message)
    if missing:
        raise JournalError(f"cannot send {name}: required fields not set: {', '.join(missing)}")
    if wire_format() == "sling-json":
        return sling_json.encode(message)
    return message.SerializeToString(), {TYPE_HEADER: name, VERSION_HEADER: WIRE_VERSION}


def decode(headers: Mapping[str, str], value: bytes) -> Message:
    """Parse a record into its message; raises UnknownMessageType (ForeignWireFormat for a
    record of the other wire format) or DecodeError."""
    is_json = MESSAGE_TYPE_HEADER in headers
    if wire_format() == "sling-json":
        if not is_json and headers.get(TYPE_HEADER) in MESSAGE_TYPES:
            raise ForeignWireFormat("protobuf record on a sling-json journal")
        return sling_json.decode(headers, value)
    if is_json:
        raise ForeignWireFormat("Sling JSON record on a protobuf journal")
    name = headers.get(TYPE_HEADER)
    if name is None:
        raise UnknownMessageType("record has no 'type' header")
    cls = MESSAGE_TYPES.get(name)
    if cls is None:
        raise UnknownMessageType(f"unknown message type {name!r}")
    message = cls()
    try:
        message.ParseFromString(value)
    except (ProtobufDecodeError, ValueError) as exc:
        raise DecodeError(f"undecodable {name} ({len(value)} bytes): {exc}") from exc
    missing = missing_required(message)
    if missing:
        raise DecodeError(f"undecodable {name}: required fields missing: {', '.join(missing)}")
    return message
