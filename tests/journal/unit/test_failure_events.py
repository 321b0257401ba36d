"""Failure events (journal/failure_events.py): what a subscriber writes reads back equal, and
every record a hostile writer of the event topic can make is refused whole with a reason."""

from __future__ import annotations

import json
from typing import Any

import pytest

from journal import failure_events as fe
from runtime.errors import DecodeError


def event(**overrides: Any) -> fe.FailureEvent:
    values: dict[str, Any] = {
        "pub_agent_name": "publish",
        "sub_agent_name": "sub-1",
        "sub_sling_id": "instance-1",
        "package_id": "pkg-1",
        "offset": 7,
        "attempt": 2,
        "max_retries": 3,
        "will_discard": False,
        "permanent": False,
        "exception": "BlobUnavailable",
        "message": "blob store unreachable",
    }
    values.update(overrides)
    return fe.FailureEvent(**values)


def raw(**overrides: Any) -> bytes:
    fields = json.loads(event().to_json())
    fields.update(overrides)
    return json.dumps({k: v for k, v in fields.items() if v is not ...}).encode()


def test_an_event_reads_back_equal_and_long_texts_are_cut_when_written() -> None:
    assert fe.parse(event().to_json()) == event()
    long = fe.parse(event(message="m" * 50_000, exception="E" * 5000).to_json())
    assert len(long.message) == fe.MAX_MESSAGE_CHARS
    assert len(long.exception) == fe.MAX_EXCEPTION_CHARS
    assert fe.is_failure_event(fe.headers())
    assert not fe.is_failure_event({"type": "PackageDistributedMessage"})


HOSTILE: dict[str, tuple[bytes, str]] = {
    "huge record": (b'{"a":"' + b"x" * fe.MAX_EVENT_BYTES + b'"}', "bytes"),
    "not JSON": (b"\xff\xfe{", "not JSON"),
    "nested too deep": (b"[" * 4000 + b"]" * 4000, "not JSON: RecursionError"),
    "a list": (b"[1, 2]", "not an object"),
    "offset a string": (raw(offset="7"), "offset is not an integer"),
    "offset a float": (raw(offset=7.0), "offset is not an integer"),
    "offset a bool": (raw(offset=True), "offset is not an integer"),
    "negative offset": (raw(offset=-1), "offset -1 outside"),
    "offset beyond int64": (raw(offset=2**63), "outside"),
    "attempt 0": (raw(attempt=0), "attempt 0 outside"),
    "max retries below -1": (raw(maxRetries=-2), "maxRetries -2 outside"),
    "unknown error class": (raw(errorClass="fatal"), "errorClass"),
    "permanent of attempt 3": (raw(errorClass="permanent", attempt=3), "attempt 1"),
    "willDiscard a string": (raw(willDiscard="yes"), "willDiscard is not a boolean"),
    "missing agent": (raw(pubAgentName=...), "pubAgentName is not a string"),
    "empty agent": (raw(subAgentName=""), "subAgentName is empty"),
    "agent with escapes": (raw(subAgentName="sub\x1b[31m"), "control characters"),
    "agent too long": (raw(pubAgentName="p" * 201), "longer than 200"),
    "message too long": (raw(message="m" * (fe.MAX_MESSAGE_CHARS + 1)), "longer than"),
    "exception a number": (raw(exception=1), "exception is not a string"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_record_is_refused_with_its_reason(case: str) -> None:
    value, reason = HOSTILE[case]
    with pytest.raises(DecodeError, match=reason) as refused:
        fe.parse(value)
    assert not refused.value.retriable
