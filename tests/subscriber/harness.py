"""Drive a subscriber agent in tests: settings on unique topics, packages written straight to
the journal (inline or spilled to the blob store), and waiting helpers."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from blobstore.api import BlobStore
from blobstore.settings import BlobStoreSettings
from journal.api import Journal, OutgoingRecord, Position
from journal.content.package import PACKAGE_TYPE, ContentPackage, checksum, encode_package
from journal.settings import JournalSettings, TopicSettings
from journal.topics import topic_specs
from journal.wire import messages as m
from subscriber.agent import SubscriberAgent
from subscriber.hooks import ImportHook
from subscriber.settings import SubscriberSettings
from subscriber.store.base import Store
from subscriber.store.delta import DeltaStore
from subscriber.writer.lease import WriterLease
from tests.services import KafkaService, S3Service, unique_topics

PUB = "publish"


def committed_offsets(store: DeltaStore) -> list[int]:
    """Every package offset the store's commits cover (imports, skips, REMOVED_FAILED), from the
    offset ranges in the Delta history: sorted, once per commit covering it, so a package applied
    twice shows up twice."""
    ranges = [
        c["metadata"]["offsets"]
        for c in store.history()
        if c["metadata"] and "offsets" in c["metadata"]
    ]
    return sorted(o for lo, hi in ranges for o in range(lo, hi + 1) if o >= 0)


def last_checkpoint(location: str | Path) -> int | None:
    """Version of the table's last Delta checkpoint (None before the first)."""
    marker = Path(location) / "_delta_log" / "_last_checkpoint"
    return int(json.loads(marker.read_text())["version"]) if marker.exists() else None


def journal_settings(kafka: KafkaService | None, prefix: str, tmp: Path) -> JournalSettings:
    topics = TopicSettings.model_validate(unique_topics(prefix))
    if kafka is None:
        return JournalSettings(backend="sqlite", sqlite_path=tmp / "journal.db", topics=topics)
    return JournalSettings(backend="kafka", bootstrap_servers=kafka.bootstrap, topics=topics)


def blob_settings(s3: S3Service | None, bucket: str, tmp: Path) -> BlobStoreSettings:
    if s3 is None:
        return BlobStoreSettings(backend="local", local_root=tmp / "blobs")
    return BlobStoreSettings(
        backend="s3",
        endpoint_url=s3.endpoint_url,
        access_key=s3.access_key,
        secret_key=SecretStr(s3.secret_key),
        region=s3.region,
        bucket=bucket,
        create_bucket=True,
    )


def subscriber_settings(
    journal: JournalSettings, blobs: BlobStoreSettings, store: Path, **overrides: Any
) -> SubscriberSettings:
    values: dict[str, Any] = {
        "agent_name": "sub",
        "pub_agents": [PUB],
        "store_path": str(store),
        "reset": "earliest",
        # Milliseconds instead of Sling's seconds: tests wait for retries, not production.
        "retry_initial_s": 0.05,
        "retry_max_s": 0.2,
        "announce_interval_s": 0.5,
        "poll_timeout_s": 0.05,
        "journal": journal,
        "blobstore": blobs,
    }
    values.update(overrides)
    return SubscriberSettings(**values)


def create_topics(journal: Journal, settings: JournalSettings) -> None:
    journal.create_topics(topic_specs(settings))


def send_package(
    journal: Journal,
    settings: JournalSettings,
    package: ContentPackage,
    *,
    blobs: BlobStore | None = None,
    pub_agent: str = PUB,
    data: bytes | None = None,
    declared_checksum: str | None = None,
    sequence: int = 0,
    fenced: bool = False,
) -> int:
    """Write a PackageMessage; with ``blobs`` the package goes by reference (spilled);
    ``sequence``: its number as the publisher's agent gives it (0: not numbered); ``fenced``:
    through a fenced writer, as a publisher's leader writes (on Kafka a transaction, whose
    marker takes the next offset)."""
    payload = encode_package(package) if data is None else data
    message = m.PackageMessage(
        pub_sling_id="pub-1",
        pub_agent_name=pub_agent,
        pkg_id=package.package_id or uuid.uuid4().hex,
        req_type=package.req_type,
        pkg_type=PACKAGE_TYPE,
        pkg_length=len(payload),
        paths=[r.path for r in package.roots],
        deep_paths=[r.path for r in package.roots if r.deep],
        created_ms=int(time.time() * 1000),
        checksum=declared_checksum if declared_checksum is not None else checksum(payload),
        sequence=sequence,
    )
    if blobs is not None:
        key = f"packages/{message.pkg_id}"
        blobs.put_bytes(key, payload)
        message.pkg_binary_ref = key
    else:
        message.pkg_binary = payload
    value, headers = m.encode(message)
    if fenced:
        writer = journal.fenced_writer(f"{pub_agent}-test-leader")
        try:
            return writer.write(settings.topics.package, [OutgoingRecord(value, None, headers)])[0]
        finally:
            writer.close()
    return journal.send(settings.topics.package, value, headers=headers)


def drive(agent: SubscriberAgent, until: Callable[[], bool], timeout_s: float = 120.0) -> None:
    """Run the agent's import loop in this thread until ``until()`` holds."""
    deadline = time.monotonic() + timeout_s
    while not until():
        assert time.monotonic() < deadline, "agent did not get there in time"
        agent.run_once()


def run_to_end_after_one_restart(
    agent: SubscriberAgent, offsets: list[int], paths: set[str], timeout_s: float = 120.0
) -> None:
    """Run the agent in its own threads until it imported ``offsets[-1]``, then check that its
    import loop restarted once and still imported each package once, giving ``paths``."""
    agent.start()
    try:
        deadline = time.monotonic() + timeout_s
        while agent.processed_offset != offsets[-1]:
            assert time.monotonic() < deadline, "the packages were not imported in time"
            time.sleep(0.05)
        assert agent.counters.loop_restarts == 1
        store = agent.store
        assert isinstance(store, DeltaStore)
        assert stored_paths(store) == paths
        assert committed_offsets(store) == offsets  # each package once
    finally:
        agent.stop()


def stored_paths(store: Store) -> set[str]:
    """The paths of the store's current tree."""
    return {n.path for n in store.nodes()}


# How long ``read_messages`` waits for a topic's first record (it returns as soon as the
# topic's end is reached).
FIRST_RECORD_S = 10.0


def read_messages(journal: Journal, topic: str) -> list[tuple[int, Any]]:
    """Every message on a topic, decoded (offset, message): read up to the topic's end as it
    was when called, or until nothing came for half a second after a record (markers a
    position may never pass). Before the first record the consumer may take seconds to
    fetch on a loaded machine: it gets FIRST_RECORD_S."""
    out: list[tuple[int, Any]] = []
    end = journal.latest_offset(topic)
    with journal.consumer(topic, Position.earliest()) as consumer:
        quiet_since, patience = time.monotonic(), FIRST_RECORD_S
        while time.monotonic() - quiet_since < patience:
            records = consumer.poll(0.05)
            for r in records:
                out.append((r.offset, m.decode(r.headers, r.value)))
            if consumer.positions().get(0, 0) >= end:
                break
            if records:
                quiet_since, patience = time.monotonic(), 0.5
        return out


def statuses(journal: Journal, settings: JournalSettings) -> dict[int, str]:
    return {
        msg.offset: m.Status.Name(msg.status)
        for _, msg in read_messages(journal, settings.topics.status)
        if isinstance(msg, m.PackageStatusMessage)
    }


def log_messages(journal: Journal, settings: JournalSettings) -> list[m.LogMessage]:
    return [
        msg
        for _, msg in read_messages(journal, settings.topics.status)
        if isinstance(msg, m.LogMessage)
    ]


def send_clear(
    journal: Journal, settings: JournalSettings, instance: str, agent: str, offset: int
) -> None:
    value, headers = m.encode(
        m.CommandMessage(
            sub_sling_id=instance,
            sub_agent_name=agent,
            pub_agent_name=PUB,
            clear_command=m.ClearCommand(offset=offset),
        )
    )
    journal.send(settings.topics.command, value, key=agent.encode(), headers=headers)


def unit_for(journal: Journal, settings: JournalSettings, offset: int) -> Any:
    """The import unit of the package record at ``offset`` (inline packages only)."""
    from journal.content.package import decode_package
    from subscriber.store.changes import Unit

    for at, message in read_messages(journal, settings.topics.package):
        if at == offset:
            package = decode_package(message.pkg_binary)
            return Unit(offset, message.pub_agent_name, message.pkg_id, message.req_type, package)
    raise AssertionError(f"no package at offset {offset}")


@dataclass
class Env:
    """A test's journal and blob store (topics created), their settings and a work folder."""

    journal: Journal
    js: JournalSettings
    blobs: BlobStore
    bs: BlobStoreSettings
    tmp: Path

    def agent(
        self,
        spark: Any,
        store: str = "store",
        hooks: Mapping[str, ImportHook] | None = None,
        **overrides: Any,
    ) -> SubscriberAgent:
        """An opened agent on a Delta store, with ``hooks`` as its import hooks if given."""
        settings = subscriber_settings(self.js, self.bs, self.tmp / store, **overrides)
        agent = SubscriberAgent(
            settings,
            self.journal,
            DeltaStore(spark, settings.store_path),
            self.blobs,
            hooks=hooks,
        )
        agent.open()
        return agent

    def memory_agent(
        self,
        store: Store | None = None,
        lease: WriterLease | None = None,
        hooks: Mapping[str, ImportHook] | None = None,
        **overrides: Any,
    ) -> SubscriberAgent:
        """An opened agent on an in-memory store (``store``: one to reopen), with ``lease``
        as its writer lease and ``hooks`` as its import hooks if given."""
        from subscriber.store.memory import MemoryStore

        settings = subscriber_settings(self.js, self.bs, self.tmp / "store", **overrides)
        agent = SubscriberAgent(
            settings, self.journal, store or MemoryStore(), self.blobs, lease=lease, hooks=hooks
        )
        agent.open()
        return agent

    def send(self, pkg: ContentPackage, **kw: Any) -> int:
        return send_package(self.journal, self.js, pkg, **kw)
