"""Failure events (Sling's DistributionFailureEvent): one JSON record on the event topic per
failed import attempt of a subscriber.

The subscriber that failed writes it (type header ``PackageFailureEvent``), keyed by its agent
name; the publisher shows them in its console. Consumers of the topic tell them from
PackageDistributedMessages by the type header. Whoever can write the topic can forge one, so
``parse`` checks every field and bounds every text: a reader keeps the record or refuses it
whole, it never trusts half of it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from journal.wire.headers import TYPE_HEADER, json_headers
from runtime.errors import DecodeError

FAILURE_EVENT_TYPE = "PackageFailureEvent"
# A record above this is refused unread: the texts below fit in a fraction of it.
MAX_EVENT_BYTES = 8 * 1024
# Names (agents, instance, package id) as long as the wire allows them elsewhere.
MAX_NAME_CHARS = 200
# An exception type name; the error text is cut (the subscriber's log and its error queue
# item have it whole).
MAX_EXCEPTION_CHARS = 200
MAX_MESSAGE_CHARS = 1000
# Offsets and counts are int64 on the wire everywhere else.
MAX_INT = 2**63 - 1


@dataclass(frozen=True)
class FailureEvent:
    pub_agent_name: str
    sub_agent_name: str
    sub_sling_id: str
    package_id: str
    offset: int
    attempt: int  # 1 for the first attempt; a permanent failure has only that one
    max_retries: int  # the subscriber's; < 0: it retries forever
    will_discard: bool  # the package is skipped (REMOVED_FAILED) after this attempt
    permanent: bool  # no retry can import it; else transient, a retry may
    exception: str  # the exception's type name
    message: str

    @property
    def error_class(self) -> str:
        return "permanent" if self.permanent else "transient"

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "pubAgentName": self.pub_agent_name,
                "subAgentName": self.sub_agent_name,
                "subSlingId": self.sub_sling_id,
                "packageId": self.package_id,
                "offset": self.offset,
                "attempt": self.attempt,
                "maxRetries": self.max_retries,
                "willDiscard": self.will_discard,
                "errorClass": self.error_class,
                "exception": self.exception[:MAX_EXCEPTION_CHARS],
                "message": self.message[:MAX_MESSAGE_CHARS],
            },
            separators=(",", ":"),
        ).encode()


def headers() -> dict[str, str]:
    return json_headers(FAILURE_EVENT_TYPE)


def is_failure_event(record_headers: Mapping[str, str]) -> bool:
    return record_headers.get(TYPE_HEADER) == FAILURE_EVENT_TYPE


def parse(value: bytes) -> FailureEvent:
    """The event a record's value holds; DecodeError (permanent: the record never becomes
    valid) naming the first rule it breaks."""
    if len(value) > MAX_EVENT_BYTES:
        raise DecodeError(f"failure event of {len(value)} bytes (at most {MAX_EVENT_BYTES})")
    try:
        raw = json.loads(value)
    except (ValueError, RecursionError) as exc:  # RecursionError: "[[[[..." nested too deep
        raise DecodeError(f"failure event is not JSON: {type(exc).__name__}") from None
    if not isinstance(raw, dict):
        raise DecodeError(f"failure event is a JSON {type(raw).__name__}, not an object")
    error_class = _text(raw, "errorClass", 20)
    if error_class not in ("permanent", "transient"):
        raise DecodeError("failure event errorClass is neither 'permanent' nor 'transient'")
    attempt = _int(raw, "attempt", 1)
    if error_class == "permanent" and attempt != 1:
        raise DecodeError("a permanent failure event is of attempt 1")
    return FailureEvent(
        pub_agent_name=_name(raw, "pubAgentName"),
        sub_agent_name=_name(raw, "subAgentName"),
        sub_sling_id=_printable(raw, "subSlingId", MAX_NAME_CHARS),
        package_id=_printable(raw, "packageId", MAX_NAME_CHARS),
        offset=_int(raw, "offset", 0),
        attempt=attempt,
        max_retries=_int(raw, "maxRetries", -1),
        will_discard=_bool(raw, "willDiscard"),
        permanent=error_class == "permanent",
        exception=_printable(raw, "exception", MAX_EXCEPTION_CHARS),
        message=_text(raw, "message", MAX_MESSAGE_CHARS),
    )


def _text(raw: dict[str, Any], key: str, limit: int) -> str:
    value = raw.get(key)
    if not isinstance(value, str):
        raise DecodeError(f"failure event {key} is not a string")
    if len(value) > limit:
        raise DecodeError(f"failure event {key} longer than {limit} characters")
    return value


def _printable(raw: dict[str, Any], key: str, limit: int) -> str:
    """A text shown on one line (a name, a type): no control characters."""
    value = _text(raw, key, limit)
    if not value.isprintable():
        raise DecodeError(f"failure event {key} holds control characters")
    return value


def _name(raw: dict[str, Any], key: str) -> str:
    value = _printable(raw, key, MAX_NAME_CHARS)
    if not value:
        raise DecodeError(f"failure event {key} is empty")
    return value


def _int(raw: dict[str, Any], key: str, minimum: int) -> int:
    value = raw.get(key)
    # bool is an int subclass; a float or string was never written by a subscriber.
    if type(value) is not int:
        raise DecodeError(f"failure event {key} is not an integer")
    if not minimum <= value <= MAX_INT:
        raise DecodeError(f"failure event {key} {value} outside [{minimum}, {MAX_INT}]")
    return value


def _bool(raw: dict[str, Any], key: str) -> bool:
    value = raw.get(key)
    if not isinstance(value, bool):
        raise DecodeError(f"failure event {key} is not a boolean")
    return value
