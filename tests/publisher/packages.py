"""Package records written straight to the journal (what any publisher instance would send)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from journal.api import Journal
from journal.messaging import MessageSender
from journal.wire.messages import PackageMessage, ReqType

PACKAGE_TOPIC = "scd.package"


def package_message(
    agent: str = "publish",
    req_type: int = ReqType.ADD,
    paths: Sequence[str] = ("/content/page",),
    deep_paths: Sequence[str] = (),
    size: int = 5000,
    created_ms: int = 1_700_000_000_000,
) -> PackageMessage:
    message = PackageMessage(
        pub_sling_id="pub-x",
        pub_agent_name=agent,
        pkg_id=uuid.uuid4().hex,
        req_type=req_type,  # type: ignore[arg-type]
        pkg_type="scd-content",
        pkg_length=size,
        created_ms=created_ms,
    )
    message.paths.extend(paths)
    message.deep_paths.extend(deep_paths)
    return message


def put_packages(
    journal: Journal, count: int, topic: str = PACKAGE_TOPIC, **kw: object
) -> list[int]:
    sender = MessageSender(journal, topic)
    pending = [sender.start_send(package_message(**kw)) for _ in range(count)]  # type: ignore[arg-type]
    return [journal.finish_send(p) for p in pending]
