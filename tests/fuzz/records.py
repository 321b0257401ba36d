"""Hostile journal records: Hypothesis strategies for what a broken or malicious writer can put
on each topic, and the writers that put them there.

Three families, as the hardening issue lists them:

* random bytes under random, absent or wrong ``type`` headers (header values that are not
  UTF-8, headers without a value, the ``type`` header twice);
* well-formed messages of every journal type with hostile field values: huge, empty and
  control-character strings, path traversal, enum values out of range, negative and huge
  offsets, garbage package payloads, wrong checksums and lengths, content packages holding odd
  nodes (dates out of range, mixed multi-values, non-finite doubles, bad blob references);
* mutations of valid records: bit flips, truncation, appended bytes, another type's header.

The event topic carries JSON, so it also gets hostile JSON (huge, non-numeric and non-finite
offsets, deep nesting). Records never exceed a topic's size limit: the journal would refuse
them before they reach any reader.

Writers: ``send_records`` goes through the journal API (what a scd process can write);
``produce_raw`` uses a bare Kafka producer, for what the API cannot send (bytes headers, null
headers and values, explicit partitions).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from google.protobuf.message import Message
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from journal.api import Journal
from journal.content.package import (
    Binary,
    BlobRef,
    ContentPackage,
    FilterRoot,
    MultiValue,
    Node,
    Value,
    checksum,
    encode_package,
)
from journal.settings import TopicSettings
from journal.wire import messages as m
from publisher.distributed_events import EVENT_TYPE, START_TYPE

T = TypeVar("T")

TOPIC_KINDS = ("package", "status", "discovery", "command", "event")
# PackageMessage.pkg_type of every package scd publishers send.
PACKAGE_TYPE = "scd-content"

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# Status, discovery, command and event topics take 64 KiB records; a hostile record stays
# below with room for the journal's per-record overhead and the headers.
CONTROL_RECORD_BYTES = 48 * 1024
# Longest "huge" string a message field gets: 3,000 two-byte characters. A message has at most
# seven such fields outside the package topic, so it stays under CONTROL_RECORD_BYTES.
HUGE_TEXT_CHARS = 3000
# Clear offsets far beyond any log end a test reaches: a subscriber must refuse them, and they
# stay beyond the end even after the packages sent later.
FAR_OFFSET = 2**40

# Strings that broke parsers, paths and logs elsewhere.
NASTY_TEXT = [
    "",
    " ",
    "/",
    "//",
    "/..",
    "/../../etc/passwd",
    "../escape",
    "/a/./b",
    "relative/path",
    "\\windows\\path",
    "/nul\x00byte",
    "\x1f\x1e\x1d",
    "/line\nbreak",
    "\u202e/right-to-left",
    "\ufffd",
    "\U0001f600",
    "%2e%2e%2f",
    "${jndi:ldap://127.0.0.1/x}",
    "'; DROP TABLE store; --",
    "%s%s%n",
    "/content/" + "a" * 300,
    "nan",
    "-1",
    "null",
]


@dataclass(frozen=True)
class Garbage:
    """One hostile record for a topic kind (``package``, ``status``, ...)."""

    kind: str
    value: bytes
    headers: tuple[tuple[str, bytes | None], ...] = ()
    key: bytes | None = None
    partition: int | None = None  # only the raw Kafka producer honours it
    null_value: bool = False  # a Kafka tombstone (raw producer only; the API sends b"")
    what: str = ""

    def text_headers(self) -> dict[str, str]:
        """The headers as the journal API takes them (text; the last of a repeated name)."""
        return {
            name: "" if value is None else value.decode("utf-8", "replace")
            for name, value in self.headers
        }

    def __repr__(self) -> str:  # hypothesis reports and failure messages stay readable
        shown = self.value[:60]
        more = f"...+{len(self.value) - 60}B" if len(self.value) > 60 else ""
        return (
            f"Garbage({self.kind}, {self.what or '-'}, headers={self.headers!r}, "
            f"key={self.key!r}, value={shown!r}{more})"
        )


def topic_names(topics: TopicSettings, **more: str) -> dict[str, str]:
    """Topic name per kind: the journal's five, plus ``more`` (say the leader topic)."""
    return {kind: str(getattr(topics, kind)) for kind in TOPIC_KINDS} | more


# ------------------------------------------------------------------ scalars
def edge_ints(low: int, high: int) -> st.SearchStrategy[int]:
    edges = [
        low,
        low + 1,
        -(2**31) - 1,
        -129,
        -1,
        0,
        1,
        127,
        128,
        255,
        256,
        2**31 - 1,
        2**31,
        2**32,
        2**53 + 1,
        FAR_OFFSET,
        high - 1,
        high,
    ]
    return st.one_of(
        st.sampled_from([v for v in edges if low <= v <= high]), st.integers(low, high)
    )


int64s = edge_ints(INT64_MIN, INT64_MAX)
int32s = edge_ints(INT32_MIN, INT32_MAX)
# Enum fields are int32 on the wire; proto3 keeps unknown values, so 200 arrives as 200.
enum_values = st.one_of(st.sampled_from([0, 1, 2, 3]), int32s)


def texts(huge: int = HUGE_TEXT_CHARS) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(NASTY_TEXT),
        st.text(st.characters(codec="utf-8"), max_size=40),
        st.integers(0, huge).map(lambda n: "\u00e9" * n),
    )


def small_texts() -> st.SearchStrategy[str]:
    return texts(huge=200)


def _optional(draw: st.DrawFn, strategy: st.SearchStrategy[T]) -> T | None:
    """A field value, or None for a field left unset (required fields included)."""
    return draw(st.one_of(st.none(), strategy, strategy, strategy))


def _set_fields(message: Message, draw: st.DrawFn, fields: Mapping[str, Any]) -> None:
    for name, strategy in fields.items():
        value = _optional(draw, strategy)
        if value is not None:
            setattr(message, name, value)


# ------------------------------------------------------------------ content packages
def nested_multi_value(depth: int) -> bytes:
    """A Value nested ``depth`` multi-values deep, as raw protobuf (the Python runtime refuses
    to build it, and a parser must refuse it without exhausting its stack)."""
    value = b"\x0a\x01a"  # Value.string_value = "a"
    for _ in range(depth):
        multi = b"\x0a" + _varint(len(value)) + value  # MultiValue.values
        value = b"\x32" + _varint(len(multi)) + multi  # Value.multi_value (field 6)
    return value


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def deep_package(depth: int = 200) -> bytes:
    """An uncompressed package envelope whose one node holds a ``depth``-deep value."""
    value = nested_multi_value(depth)
    entry = b"\x0a\x01p" + b"\x12" + _varint(len(value)) + value  # PropertiesEntry p -> value
    node = b"\x0a\x07/fuzz/d" + b"\x12" + _varint(len(entry)) + entry
    package = b"\x1a\x09\x0a\x05/fuzz\x10\x01" + b"\x22" + _varint(len(node)) + node
    return b"SCDP\x01\x00" + package


def blob_refs() -> st.SearchStrategy[BlobRef]:
    return st.builds(
        BlobRef,
        key=small_texts(),
        size=int64s,
        sha256=st.one_of(small_texts(), st.just("0" * 64), st.just("A" * 64)),
        content_type=small_texts(),
    )


def binaries() -> st.SearchStrategy[Binary]:
    return st.one_of(
        st.builds(Binary, inline=st.binary(max_size=200), content_type=small_texts()),
        st.builds(Binary, ref=blob_refs(), content_type=small_texts()),
        st.just(Binary()),
    )


def scalar_values() -> st.SearchStrategy[Value]:
    return st.one_of(
        small_texts().map(lambda s: Value(string_value=s)),
        int64s.map(lambda n: Value(long_value=n)),
        st.floats().map(lambda f: Value(double_value=f)),
        st.booleans().map(lambda b: Value(bool_value=b)),
        int64s.map(lambda n: Value(date_ms=n)),  # beyond year 9999 and before year 1
    )


def property_values() -> st.SearchStrategy[Value]:
    leaves = st.one_of(scalar_values(), binaries().map(lambda b: Value(binary_value=b)))
    return st.one_of(
        st.just(Value()),  # no type at all
        st.recursive(
            leaves,
            lambda children: st.lists(children, max_size=3).map(
                lambda vs: Value(multi_value=MultiValue(values=vs))
            ),
            max_leaves=6,
        ),
    )


def node_paths() -> st.SearchStrategy[str]:
    segment = st.one_of(
        st.sampled_from(["a", "b", "jcr:content", "..", ".", "", "x" * 300]),
        st.text(st.characters(codec="utf-8"), min_size=1, max_size=12),
    )
    return st.one_of(
        small_texts(),
        st.lists(segment, min_size=1, max_size=4).map(lambda parts: "/fuzz/" + "/".join(parts)),
    )


@st.composite
def content_packages(draw: st.DrawFn) -> ContentPackage:
    """A decodable content package whose roots and nodes break every rule they can."""
    package = ContentPackage(
        package_id=draw(small_texts()),
        req_type=draw(enum_values),  # type: ignore[arg-type]
        created_ms=draw(int64s),
    )
    for path, deep in draw(st.lists(st.tuples(node_paths(), st.booleans()), max_size=3)):
        package.roots.append(FilterRoot(path=path, deep=deep))
    for path in draw(st.lists(node_paths(), max_size=4)):
        node = package.nodes.add(path=path)
        names = draw(st.lists(small_texts(), max_size=3))
        for name in names:
            node.properties[name].CopyFrom(draw(property_values()))
    for key, value in draw(st.dictionaries(small_texts(), small_texts(), max_size=2)).items():
        package.metadata[key] = value
    return package


def package_payloads() -> st.SearchStrategy[bytes]:
    """Bytes for PackageMessage.pkg_binary: junk, junk in a package envelope, and hostile
    packages properly encoded."""
    envelope = struct.Struct(">4sBB")
    return st.one_of(
        st.binary(max_size=2000),
        st.builds(
            lambda magic, version, codec, body: envelope.pack(magic, version, codec) + body,
            st.sampled_from([b"SCDP", b"SCDQ", b"\x00\x00\x00\x00"]),
            st.sampled_from([0, 1, 2, 255]),
            st.sampled_from([0, 1, 2, 255]),
            st.binary(max_size=500),
        ),
        st.binary(max_size=500).map(lambda b: b"SCDP\x01\x01" + zlib.compress(b)),
        st.binary(max_size=500).map(lambda b: b"SCDP\x01\x01" + zlib.compress(b)[:-3]),
        st.builds(lambda p, c: encode_package(p, compress=c), content_packages(), st.booleans()),
        st.just(deep_package()),
    )


# ------------------------------------------------------------------ journal messages
# Blob references that are malformed whatever the store holds (traversal, absolute, control
# characters, oversized). A well-formed reference to a missing blob is a different case: the
# subscriber waits for it as for a store that is down (PackageUnavailable, retriable), so such
# records only go where nothing has to get past them.
MALFORMED_REFS = [
    "../../../../etc/passwd",
    "/etc/passwd",
    "packages/../../../etc/hostname",
    "packages/a\x00b",
    "packages/" + "x" * 5000,
    "\\..\\..\\windows",
]


@st.composite
def package_messages(
    draw: st.DrawFn, agents: Sequence[str], *, any_blob_ref: bool = True
) -> m.PackageMessage:
    payload = draw(package_payloads())
    message = m.PackageMessage()
    refs = st.sampled_from(MALFORMED_REFS)
    _set_fields(
        message,
        draw,
        {
            "pub_sling_id": small_texts(),
            "pub_agent_name": st.one_of(st.sampled_from(list(agents)), small_texts()),
            "pkg_id": texts(),
            "req_type": enum_values,
            "pkg_type": st.one_of(st.just(PACKAGE_TYPE), small_texts()),
            "pkg_length": st.one_of(st.just(len(payload)), int64s),
            "pkg_binary": st.just(payload),
            "pkg_binary_ref": st.one_of(refs, texts()) if any_blob_ref else refs,
            "user_id": texts(),
            "created_ms": int64s,
            "checksum": st.one_of(st.just(checksum(payload)), small_texts(), st.just("0" * 64)),
        },
    )
    message.paths.extend(draw(st.lists(node_paths(), max_size=4)))
    message.deep_paths.extend(draw(st.lists(node_paths(), max_size=4)))
    for key, value in draw(st.dictionaries(small_texts(), small_texts(), max_size=3)).items():
        message.metadata[key] = value
    return message


@st.composite
def status_messages(draw: st.DrawFn, agents: Sequence[str]) -> m.PackageStatusMessage:
    message = m.PackageStatusMessage()
    _set_fields(
        message,
        draw,
        {
            "sub_sling_id": texts(),
            "sub_agent_name": texts(),
            "pub_agent_name": st.one_of(st.sampled_from(list(agents)), texts()),
            "offset": int64s,
            "status": enum_values,
        },
    )
    return message


@st.composite
def discovery_messages(draw: st.DrawFn, agents: Sequence[str]) -> m.DiscoveryMessage:
    message = m.DiscoveryMessage()
    _set_fields(message, draw, {"sub_sling_id": texts(), "sub_agent_name": texts()})
    if draw(st.booleans()):
        config = m.SubscriberConfiguration()
        _set_fields(config, draw, {"editable": st.booleans(), "max_retries": int32s})
        message.subscriber_configuration.CopyFrom(config)
    for _ in range(draw(st.integers(0, 4))):
        state = message.subscriber_state.add()
        _set_fields(
            state,
            draw,
            {
                "pub_agent_name": st.one_of(st.sampled_from(list(agents)), texts()),
                "offset": int64s,
                "retries": int32s,
            },
        )
    return message


@st.composite
def command_messages(
    draw: st.DrawFn, agents: Sequence[str], targets: Sequence[tuple[str, str]] = ()
) -> m.CommandMessage:
    """Commands; those addressed to a real subscriber (``targets``: instance id, agent name)
    only clear offsets that are negative or far beyond the log's end, which it must refuse."""
    message = m.CommandMessage()
    target = draw(st.one_of(st.none(), st.sampled_from(list(targets)))) if targets else None
    if target is not None:
        message.sub_sling_id, message.sub_agent_name = target
        offsets = st.one_of(st.integers(INT64_MIN, -1), st.integers(FAR_OFFSET, INT64_MAX))
    else:
        _set_fields(message, draw, {"sub_sling_id": texts(), "sub_agent_name": texts()})
        offsets = int64s
    _set_fields(
        message, draw, {"pub_agent_name": st.one_of(st.sampled_from(list(agents)), texts())}
    )
    if draw(st.booleans()):
        clear = m.ClearCommand()
        _set_fields(clear, draw, {"offset": offsets})
        message.clear_command.CopyFrom(clear)
    return message


@st.composite
def log_messages(draw: st.DrawFn, agents: Sequence[str]) -> m.LogMessage:
    message = m.LogMessage()
    _set_fields(
        message,
        draw,
        {
            "pub_agent_name": st.one_of(st.sampled_from(list(agents)), texts()),
            "sub_sling_id": texts(),
            "sub_agent_name": texts(),
            "message": texts(),
            "stacktrace": texts(),
            "offset": int64s,
            "pkg_id": texts(),
        },
    )
    return message


def hostile_messages(
    agents: Sequence[str],
    targets: Sequence[tuple[str, str]] = (),
    *,
    packages: bool = True,
    any_blob_ref: bool = True,
) -> st.SearchStrategy[Message]:
    choices: list[st.SearchStrategy[Message]] = [
        status_messages(agents),
        discovery_messages(agents),
        command_messages(agents, targets),
        log_messages(agents),
        st.just(m.PingMessage()),
    ]
    if packages:
        choices.append(package_messages(agents, any_blob_ref=any_blob_ref))
    return st.one_of(choices)


# ------------------------------------------------------------------ headers
TYPE_NAMES = sorted(m.MESSAGE_TYPES)
WRONG_TYPES = [
    *TYPE_NAMES,
    EVENT_TYPE,
    START_TYPE,
    "",
    "packagemessage",
    "PackageMessage ",
    "PackageMessage\x00",
    "ContentPackage",
    "SubscriberState",
    "ClearCommand",
]


def header_values() -> st.SearchStrategy[bytes | None]:
    return st.one_of(
        st.none(),
        st.binary(max_size=24),  # mostly not UTF-8
        st.sampled_from(WRONG_TYPES).map(str.encode),
        small_texts().map(lambda s: s.encode()),
    )


def extra_headers() -> st.SearchStrategy[list[tuple[str, bytes | None]]]:
    names = st.one_of(
        st.sampled_from([m.TYPE_HEADER, m.VERSION_HEADER, "Type", "sig", "key-id", ""]),
        st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12),
    )
    return st.lists(st.tuples(names, header_values()), max_size=3)


@st.composite
def headers_for(draw: st.DrawFn, type_name: str | None) -> tuple[tuple[str, bytes | None], ...]:
    """The record's headers: usually its own type, else a wrong, absent or undecodable one,
    plus extra headers (a repeated ``type`` among them)."""
    own = [(m.TYPE_HEADER, type_name.encode())] if type_name is not None else []
    type_headers = draw(
        st.one_of(
            st.just(own),
            st.just(own),
            st.just([]),
            header_values().map(lambda v: [(m.TYPE_HEADER, v)]),
        )
    )
    version = draw(st.one_of(st.just([(m.VERSION_HEADER, m.WIRE_VERSION.encode())]), st.just([])))
    return tuple(type_headers + version + draw(extra_headers()))


# ------------------------------------------------------------------ records
def random_records(kind: str) -> st.SearchStrategy[Garbage]:
    """Random bytes under random, absent or wrong type headers."""
    return st.builds(
        lambda value, headers, key: Garbage(kind, value, headers, key, what="random bytes"),
        st.binary(max_size=4000),
        st.one_of(st.sampled_from([None, *TYPE_NAMES])).flatmap(headers_for),
        st.one_of(st.none(), st.binary(max_size=16)),
    )


def message_records(
    kind: str,
    agents: Sequence[str],
    targets: Sequence[tuple[str, str]] = (),
    *,
    any_blob_ref: bool = True,
) -> st.SearchStrategy[Garbage]:
    """Well-formed protobuf of any journal type, hostile in its fields (serialized as is:
    required fields may be missing), usually under its own type header."""

    @st.composite
    def build(draw: st.DrawFn) -> Garbage:
        message = draw(
            hostile_messages(
                agents,
                targets,
                packages=kind == "package" or draw(st.booleans()),
                any_blob_ref=any_blob_ref,
            )
        )
        name = message.DESCRIPTOR.name
        key = draw(st.one_of(st.none(), st.sampled_from([a.encode() for a in agents])))
        return Garbage(
            kind, message.SerializeToString(), draw(headers_for(name)), key, what=f"hostile {name}"
        )

    return build()


@st.composite
def valid_records(draw: st.DrawFn, agents: Sequence[str]) -> tuple[str, bytes]:
    """A record a scd process could have written (type name, encoded message)."""
    agent = draw(st.sampled_from(list(agents)))
    package = ContentPackage(
        package_id="p1",
        req_type=m.ReqType.ADD,
        roots=[FilterRoot(path="/fuzz/m", deep=True)],
        nodes=[Node(path="/fuzz/m/n", properties={"title": Value(string_value="t")})],
    )
    payload = encode_package(package)
    message: Message = draw(
        st.sampled_from(
            [
                m.PackageMessage(
                    pub_sling_id="pub",
                    pub_agent_name=agent,
                    pkg_id="p1",
                    req_type=m.ReqType.ADD,
                    pkg_type=PACKAGE_TYPE,
                    pkg_length=len(payload),
                    pkg_binary=payload,
                    paths=["/fuzz/m"],
                    deep_paths=["/fuzz/m"],
                    checksum=checksum(payload),
                ),
                m.PackageStatusMessage(
                    sub_sling_id="s",
                    sub_agent_name="sub",
                    pub_agent_name=agent,
                    offset=3,
                    status=m.Status.REMOVED_FAILED,
                ),
                m.DiscoveryMessage(
                    sub_sling_id="s",
                    sub_agent_name="sub",
                    subscriber_state=[m.SubscriberState(pub_agent_name=agent, offset=2)],
                    subscriber_configuration=m.SubscriberConfiguration(
                        editable=True, max_retries=1
                    ),
                ),
                m.CommandMessage(
                    sub_sling_id="s",
                    sub_agent_name="sub",
                    pub_agent_name=agent,
                    clear_command=m.ClearCommand(offset=1),
                ),
                m.LogMessage(pub_agent_name=agent, sub_agent_name="sub", message="boom", offset=3),
            ]
        )
    )
    value, headers = m.encode(message)
    return headers[m.TYPE_HEADER], value


def _flip(value: bytes, positions: list[int]) -> bytes:
    out = bytearray(value)
    for p in positions:
        if out:
            out[p % len(out)] ^= 1 << (p % 8)
    return bytes(out)


def mutated_records(kind: str, agents: Sequence[str]) -> st.SearchStrategy[Garbage]:
    """Valid records with flipped bits, cut short, extended, or under another type's name."""

    @st.composite
    def build(draw: st.DrawFn) -> Garbage:
        name, value = draw(valid_records(agents))
        mutation = draw(st.sampled_from(["flip", "truncate", "append", "retype", "splice"]))
        if mutation == "flip":
            value = _flip(value, draw(st.lists(st.integers(0, 10**6), min_size=1, max_size=8)))
        elif mutation == "truncate":
            value = value[: draw(st.integers(0, max(len(value) - 1, 0)))]
        elif mutation == "append":
            value += draw(st.binary(min_size=1, max_size=64))
        elif mutation == "retype":
            name = draw(st.sampled_from(WRONG_TYPES))
        else:
            at = draw(st.integers(0, len(value)))
            value = value[:at] + draw(st.binary(max_size=32)) + value[at:]
        headers = ((m.TYPE_HEADER, name.encode()), (m.VERSION_HEADER, b"1"))
        return Garbage(kind, value, headers, what=f"{mutation} of a valid {name}")

    return build()


def event_records(agents: Sequence[str]) -> st.SearchStrategy[Garbage]:
    """Hostile JSON on the event topic, under the event or start type header or another."""
    agent = st.one_of(st.sampled_from(list(agents)), small_texts())
    json_offsets = st.one_of(
        st.sampled_from(
            ["1e999", "-1e999", "NaN", "Infinity", '"12"', "true", "null", "[]", "{}", "1.5"]
        ),
        st.integers(-(10**30), 10**30).map(str),
    )

    def event(agent: str, offset: str, field: str) -> bytes:
        return (
            f'{{"pubAgentName":{json.dumps(agent)},"packageId":"x",'
            f'"{field}":{offset},"paths":["/fuzz"],"deepPaths":[],"application":"evil"}}'
        ).encode()

    values = st.one_of(
        st.builds(event, agent, json_offsets, st.sampled_from(["offset", "startAfter"])),
        st.integers(1, 40_000).map(lambda n: b"[" * n),  # nesting no parser should follow
        st.integers(1, 9_000).map(lambda n: b'{"a":' * n),
        st.sampled_from([b"", b"[]", b"1", b'"x"', b"null", b"{", b"\xff\xfe"]),
        st.binary(max_size=200),
    )
    type_names = st.sampled_from([EVENT_TYPE, EVENT_TYPE, START_TYPE, *TYPE_NAMES, ""])
    return st.builds(
        lambda value, name, key: Garbage(
            "event", value, ((m.TYPE_HEADER, name.encode()),), key, what="hostile event JSON"
        ),
        values,
        type_names,
        st.one_of(st.none(), agent.map(str.encode)),
    )


def garbage(
    agents: Sequence[str],
    targets: Sequence[tuple[str, str]] = (),
    *,
    kinds: Sequence[str] = TOPIC_KINDS,
    any_blob_ref: bool = True,
) -> st.SearchStrategy[Garbage]:
    """Any hostile record for any of ``kinds``, from every family."""

    def for_kind(kind: str) -> st.SearchStrategy[Garbage]:
        families = [
            random_records(kind),
            message_records(kind, agents, targets, any_blob_ref=any_blob_ref),
            mutated_records(kind, agents),
        ]
        if kind == "event":
            families.append(event_records(agents))
        return st.one_of(families)

    partitions = st.one_of(st.none(), st.integers(0, 7))
    return st.builds(
        lambda record, partition, null: replace(
            record, partition=partition, null_value=null and not record.value
        ),
        st.sampled_from(list(kinds)).flatmap(for_kind),
        partitions,
        st.booleans(),
    )


def draw_batch(strategy: st.SearchStrategy[T], count: int) -> list[T]:
    """``count`` examples of ``strategy``, the same ones on every run (a fixed seed), for the
    tests that send one batch through an expensive system instead of one example at a time."""
    drawn: list[T] = []

    @settings(
        max_examples=count,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(example: T) -> None:
        drawn.append(example)

    collect()
    return drawn


def typed(name: str) -> tuple[tuple[str, bytes | None], ...]:
    return ((m.TYPE_HEADER, name.encode()), (m.VERSION_HEADER, m.WIRE_VERSION.encode()))


# ------------------------------------------------------------------ writers
def send_records(journal: Journal, topics: Mapping[str, str], records: Iterable[Garbage]) -> int:
    """Write ``records`` through the journal API (``topics``: name per kind); returns how many
    were written."""
    pending = [
        journal.start_send(topics[g.kind], g.value, key=g.key, headers=g.text_headers() or None)
        for g in records
    ]
    for p in pending:
        journal.finish_send(p)
    return len(pending)


def produce_raw(
    bootstrap: str,
    topics: Mapping[str, str],
    records: Iterable[Garbage],
    partitions: Mapping[str, int],
) -> int:
    """Write ``records`` with a bare Kafka producer: bytes and null header values, null values
    and explicit partitions, as any Kafka client can send them. ``topics`` and ``partitions``:
    name and partition count per kind."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 16 * 1024 * 1024})
    errors: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    count = 0
    for g in records:
        kwargs: dict[str, Any] = {"on_delivery": delivered}
        if g.headers:
            kwargs["headers"] = list(g.headers)
        if g.partition is not None:
            kwargs["partition"] = g.partition % partitions[g.kind]
        producer.produce(topics[g.kind], None if g.null_value else g.value, g.key, **kwargs)
        producer.poll(0)
        count += 1
    left = producer.flush(60)
    assert not errors, f"raw producer: delivery failed: {errors[:5]}"
    assert left == 0, f"raw producer: {left} records unsent"
    return count


def control_sized(records: Iterable[Garbage]) -> list[Garbage]:
    """Records as they are, checked against the size limit of their topic."""
    out = list(records)
    for g in out:
        limit = 900 * 1024 if g.kind == "package" else CONTROL_RECORD_BYTES
        assert len(g.value) <= limit, f"strategy built an oversized record: {g!r}"
    return out
