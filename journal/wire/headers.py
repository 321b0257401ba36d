"""The record headers of scd's journal and the wire format of a deployment.

Every record carries ``type`` (scd's message type) and ``version``. On a ``sling-json``
deployment a record also carries Apache Sling's ``messageType`` (the simple name of Sling's
message class) and, where scd's extensions have values, ``scd-ext``: they cannot travel inside
the JSON, whose fields are exactly Sling's (journal/wire/sling_json.py).

The wire format is one setting per deployment (``SCD_JOURNAL_WIRE_FORMAT``, journal/settings.py);
opening the journal (journal/factory.py) makes it the process's, which every encode and decode
follows.
"""

from __future__ import annotations

from typing import Literal

TYPE_HEADER = "type"
VERSION_HEADER = "version"
# Version of the journal message schema. Readers accept any version: protobuf evolution rules
# (new field numbers only) keep old readers working; the header is for diagnostics.
WIRE_VERSION = "1"
# Sling's header naming a JSON record's message class (KafkaJsonMessageSender).
MESSAGE_TYPE_HEADER = "messageType"
# scd's extensions of a Sling JSON message, as a JSON object (journal/wire/sling_json.py).
EXT_HEADER = "scd-ext"

WireFormat = Literal["protobuf", "sling-json"]
WIRE_FORMATS: tuple[WireFormat, ...] = ("protobuf", "sling-json")

_current: WireFormat = "protobuf"


def wire_format() -> WireFormat:
    """The wire format this process writes and reads."""
    return _current


def set_wire_format(wire: WireFormat) -> None:
    global _current
    if wire not in WIRE_FORMATS:
        raise ValueError(f"unknown wire format {wire!r} (one of {', '.join(WIRE_FORMATS)})")
    _current = wire


def json_headers(type_name: str) -> dict[str, str]:
    """Headers of a record whose value is JSON of scd's own (an event): Sling's
    ``messageType`` too on a sling-json deployment, naming the type Sling skips or reads."""
    headers = {TYPE_HEADER: type_name, VERSION_HEADER: WIRE_VERSION}
    if _current == "sling-json":
        headers[MESSAGE_TYPE_HEADER] = type_name
    return headers
