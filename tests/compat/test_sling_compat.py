"""Every journal message scd encodes parses with a proto2 decoder built from Sling's schema,
required fields included, even when they hold default values (offset 0, ADD, REMOVED_FAILED)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from google.protobuf.message import DecodeError, Message

from journal.errors import JournalError
from journal.wire import messages as m

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def sling(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    from grpc_tools import protoc

    out = tmp_path_factory.mktemp("sling")
    assert protoc.main(["protoc", f"-I{HERE}", f"--python_out={out}", "sling_journal.proto"]) == 0
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module("sling_journal_pb2")
    finally:
        sys.path.remove(str(out))
        sys.modules.pop("sling_journal_pb2", None)


def sling_parse(cls: type[Message], value: bytes) -> Message:
    """Parse as Sling's Java ``parseFrom`` does: a missing required field is an error."""
    message = cls()
    message.ParseFromString(value)
    if not message.IsInitialized():
        raise DecodeError(f"{cls.DESCRIPTOR.name}: required fields missing")
    return message


def defaults_only() -> list[Message]:
    """Messages whose required fields all hold proto default values."""
    return [
        m.PackageMessage(pub_sling_id="", pkg_id="", req_type=m.ReqType.ADD, pkg_type=""),
        m.PackageStatusMessage(
            sub_sling_id="",
            sub_agent_name="",
            pub_agent_name="",
            offset=0,
            status=m.Status.REMOVED_FAILED,
        ),
        m.DiscoveryMessage(
            sub_sling_id="",
            sub_agent_name="",
            subscriber_state=[m.SubscriberState(pub_agent_name="", offset=0)],
            subscriber_configuration=m.SubscriberConfiguration(editable=False, max_retries=0),
        ),
        m.CommandMessage(
            sub_sling_id="", sub_agent_name="", clear_command=m.ClearCommand(offset=0)
        ),
        m.PingMessage(),
    ]


def typical() -> list[Message]:
    return [
        m.PackageMessage(
            pub_sling_id="pub-1",
            pub_agent_name="publish",
            pkg_id="pkg-42",
            req_type=m.ReqType.DELETE,
            pkg_length=1234,
            pkg_binary=b"\x01\x02",
            paths=["/a", "/b"],
            deep_paths=["/a"],
            pkg_binary_ref="packages/pkg-42",
            pkg_type="scd-content",
            user_id="admin",
            metadata={"k": "v"},
            created_ms=1_700_000_000_000,
            checksum="ab" * 32,
        ),
        m.PackageStatusMessage(
            sub_sling_id="s",
            sub_agent_name="sub",
            pub_agent_name="publish",
            offset=99,
            status=m.Status.IMPORTED,
        ),
        m.DiscoveryMessage(
            sub_sling_id="s",
            sub_agent_name="sub",
            subscriber_state=[
                m.SubscriberState(pub_agent_name="a", offset=5, retries=2),
                m.SubscriberState(pub_agent_name="b", offset=7),
            ],
            subscriber_configuration=m.SubscriberConfiguration(editable=True, max_retries=-1),
        ),
        m.CommandMessage(
            sub_sling_id="s",
            sub_agent_name="sub",
            clear_command=m.ClearCommand(offset=12),
            pub_agent_name="publish",
        ),
    ]


@pytest.mark.parametrize("message", defaults_only() + typical(), ids=lambda x: type(x).__name__)
def test_sling_decoder_parses_what_we_write(sling: ModuleType, message: Message) -> None:
    value, headers = m.encode(message)
    assert headers["type"] == message.DESCRIPTOR.name
    theirs = sling_parse(getattr(sling, message.DESCRIPTOR.name), value)
    for field, val in theirs.ListFields():
        ours = getattr(message, field.name)
        if field.message_type is None and not field.is_repeated:
            assert val == ours, field.name
    # And back: what Sling writes, we read.
    assert m.decode(headers, theirs.SerializeToString()) == message


def test_the_compat_check_can_fail(sling: ModuleType) -> None:
    """Without explicit presence, a default offset is not written and Sling refuses it."""
    unset = m.PackageStatusMessage(
        sub_sling_id="s", sub_agent_name="a", pub_agent_name="p", status=m.Status.IMPORTED
    )
    with pytest.raises(DecodeError):
        sling_parse(sling.PackageStatusMessage, unset.SerializeToString())
    with pytest.raises(JournalError, match="offset"):
        m.encode(unset)  # and our encoder never lets it out


def test_invalidate_is_an_extension_sling_cannot_read(sling: ModuleType) -> None:
    value, _ = m.encode(
        m.PackageMessage(pub_sling_id="p", pkg_id="i", req_type=m.ReqType.INVALIDATE, pkg_type="t")
    )
    with pytest.raises(DecodeError):  # closed proto2 enum: unknown value, required field absent
        sling_parse(sling.PackageMessage, value)
