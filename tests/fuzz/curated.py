"""Hostile records chosen by hand for the failures they aim at, so that no run depends on the
generator happening to find them: request types and lengths out of range, every way a package
payload can be wrong, content breaking each content rule, references that escape the blob
store, a forged subscriber at the highest offset, clears far beyond the log's end for the real
subscribers, and event records a new leader must not resume from."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
from journal.wire import messages as m
from publisher.distributed_events import EVENT_TYPE
from tests.fuzz.records import (
    FAR_OFFSET,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    PACKAGE_TYPE,
    TYPE_NAMES,
    Garbage,
    deep_package,
    typed,
)


def curated_records(agent: str, targets: Sequence[tuple[str, str]] = ()) -> list[Garbage]:
    """``agent``: the publisher agent the subscribers follow; ``targets``: the real
    subscribers (instance id, agent name)."""

    def package(**fields: Any) -> Garbage:
        what = str(fields.pop("what"))
        payload: bytes = fields.pop("payload", b"")
        message = m.PackageMessage(
            pub_sling_id="evil",
            pub_agent_name=agent,
            pkg_id="evil-pkg",
            req_type=m.ReqType.ADD,
            pkg_type=PACKAGE_TYPE,
            pkg_length=len(payload),
            pkg_binary=payload,
            checksum=checksum(payload) if payload else "",
            paths=["/fuzz/evil"],
            deep_paths=["/fuzz/evil"],
        )
        for name, value in fields.items():
            setattr(message, name, value)
        return Garbage("package", message.SerializeToString(), typed("PackageMessage"), what=what)

    def content(*nodes: Node, req_type: int = m.ReqType.ADD) -> bytes:
        return encode_package(
            ContentPackage(
                package_id="evil-pkg",
                req_type=req_type,  # type: ignore[arg-type]
                roots=[FilterRoot(path="/fuzz/evil", deep=True)],
                nodes=list(nodes),
            )
        )

    def prop(value: Value) -> Node:
        return Node(path="/fuzz/evil/n", properties={"p": value})

    records = [
        package(what="request type 200", req_type=200, payload=content()),
        package(what="request type -1", req_type=-1, payload=content()),
        package(what="request type 2**31-1", req_type=INT32_MAX, payload=content()),
        package(what="negative length", pkg_length=-5, payload=content()),
        package(what="huge length", pkg_length=INT64_MAX, payload=content()),
        package(what="wrong checksum", payload=content(), checksum="0" * 64),
        package(what="garbage payload", payload=b"\x00garbage" * 10),
        package(what="unknown package version", payload=b"SCDP\x09\x00junk"),
        package(what="corrupt zlib", payload=b"SCDP\x01\x01" + b"\x78\x9c\xff" * 20),
        package(what="value nested 200 deep", payload=deep_package()),
        package(what="date beyond year 9999", payload=content(prop(Value(date_ms=INT64_MAX)))),
        package(what="date before year 1", payload=content(prop(Value(date_ms=INT64_MIN)))),
        package(
            what="multi-value mixing types",
            payload=content(
                prop(
                    Value(
                        multi_value=MultiValue(
                            values=[Value(string_value="a"), Value(long_value=1)]
                        )
                    )
                )
            ),
        ),
        package(
            what="binary inside a multi-value",
            payload=content(
                prop(
                    Value(multi_value=MultiValue(values=[Value(binary_value=Binary(inline=b"x"))]))
                )
            ),
        ),
        package(what="value without a type", payload=content(prop(Value()))),
        package(what="NaN double", payload=content(prop(Value(double_value=float("nan"))))),
        package(
            what="node path with '..'",
            payload=content(Node(path="/fuzz/evil/../../etc", properties={})),
        ),
        package(
            what="node outside its roots", payload=content(Node(path="/elsewhere", properties={}))
        ),
        package(
            what="blob reference with traversal",
            payload=content(
                prop(Value(binary_value=Binary(ref=BlobRef(key="../../../etc/passwd", size=1))))
            ),
        ),
        package(
            what="package reference with traversal",
            pkg_binary=b"",
            pkg_binary_ref="../../../../etc/passwd",
            pkg_length=10,
        ),
        package(what="no package type", pkg_type="", payload=content()),
        Garbage("package", b"", (), what="empty record without headers"),
        Garbage("package", b"\x0a\x05hello", typed("NoSuchMessage"), what="unknown type"),
    ]
    for name in TYPE_NAMES:  # every type's bytes under the package type, and the reverse
        records.append(Garbage("package", b"\x08\x96\x01", typed(name), what=f"junk {name}"))
    records.append(
        Garbage(
            "status",
            m.LogMessage(
                pub_agent_name=agent, sub_agent_name="sub", message="\u00e9" * 20_000
            ).SerializeToString(),
            typed("LogMessage"),
            what="40 KB log message",
        )
    )
    records.append(
        Garbage(
            "status",
            m.PackageStatusMessage(
                sub_sling_id="s",
                sub_agent_name="sub",
                pub_agent_name=agent,
                offset=INT64_MIN,
                status=m.Status.REMOVED_FAILED,
            ).SerializeToString(),
            typed("PackageStatusMessage"),
            what="REMOVED_FAILED at the lowest offset",
        )
    )
    records.append(
        Garbage(
            "discovery",
            m.DiscoveryMessage(
                sub_sling_id="evil",
                sub_agent_name="evil",
                subscriber_state=[
                    m.SubscriberState(pub_agent_name=agent, offset=INT64_MAX, retries=INT32_MAX)
                ],
                subscriber_configuration=m.SubscriberConfiguration(
                    editable=True, max_retries=INT32_MIN
                ),
            ).SerializeToString(),
            typed("DiscoveryMessage"),
            key=b"evil",
            what="subscriber at the highest offset",
        )
    )
    for instance, name in targets:
        for offset in (INT64_MAX, FAR_OFFSET, -2):
            records.append(
                Garbage(
                    "command",
                    m.CommandMessage(
                        sub_sling_id=instance,
                        sub_agent_name=name,
                        pub_agent_name=agent,
                        clear_command=m.ClearCommand(offset=offset),
                    ).SerializeToString(),
                    typed("CommandMessage"),
                    key=name.encode(),
                    what=f"clear up to {offset} for {name}",
                )
            )
    for value in (
        f'{{"pubAgentName":"{agent}","offset":1e999}}'.encode(),
        f'{{"pubAgentName":"{agent}","offset":"NaN"}}'.encode(),
        f'{{"pubAgentName":"{agent}","startAfter":{INT64_MAX}}}'.encode(),
        b"[" * 40_000,
    ):
        records.append(
            Garbage(
                "event",
                value,
                typed(EVENT_TYPE),
                key=agent.encode(),
                what=f"event {value[:40]!r}",
            )
        )
    return records
