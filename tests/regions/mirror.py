"""Two regions on this machine for the region tests: a second Kafka cluster fed by MirrorMaker 2
(deploy/mirrormaker.sh, Apache Kafka's own tool) and a blob replicator that copies one bucket
into another after a lag, as S3 cross-region replication does.

MirrorMaker's default replication policy is used on purpose: region B holds region A's package
topic as ``<alias of A>.<topic>``, a topic of its own whose offsets start wherever MirrorMaker
began copying, so a position on A means nothing on B.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from journal.api import Journal
from journal.settings import JournalSettings, TopicSettings
from tests.services import KafkaService, run_deploy, scd_home

if TYPE_CHECKING:
    from types_boto3_s3.client import S3Client

log = logging.getLogger(__name__)

# Every MirrorMaker topic (its Connect state, heartbeats, offset syncs) on single-broker
# clusters must have one replica; MirrorMaker's defaults ask for 3 and would fail to start.
SINGLE_BROKER_SETTINGS = (
    "replication.factor",
    "checkpoints.topic.replication.factor",
    "heartbeats.topic.replication.factor",
    "offset-syncs.topic.replication.factor",
    "offset.storage.replication.factor",
    "status.storage.replication.factor",
    "config.storage.replication.factor",
)
# MirrorMaker looks for new topics matching a flow's pattern this often (default 10 min): tests
# create their topics after it starts.
REFRESH_TOPICS_S = 2
# MirrorMaker picks up new topics within its refresh interval and copies within a second or
# two; 90 s covers a loaded 2-core machine.
MIRROR_TIMEOUT_S = 90.0
# The topics copied A->B; status and discovery go B->A.
MIRROR_KINDS = ("package", "command")
# Package records may be up to the package topic's max.message.bytes (scd's limit, 16 MiB at
# most); MirrorMaker's producer must be allowed to copy them (its default is 1 MiB).
MAX_REQUEST_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Flow:
    """Topics mirrored from one cluster (by alias) to another."""

    source: str
    target: str
    topics: Sequence[str]


def mm2_properties(clusters: dict[str, str], flows: Sequence[Flow]) -> str:
    """A MirrorMaker 2 dedicated-mode configuration: ``clusters`` maps alias to bootstrap."""
    lines = [f"clusters = {', '.join(clusters)}"]
    lines += [f"{alias}.bootstrap.servers = {address}" for alias, address in clusters.items()]
    for flow in flows:
        name = f"{flow.source}->{flow.target}"
        # Topic names are literal here, not patterns: escape the regex metacharacter '.'.
        pattern = "|".join(topic.replace(".", "\\\\.") for topic in flow.topics)
        lines += [f"{name}.enabled = true", f"{name}.topics = {pattern}"]
        lines.append(f"{flow.target}.producer.max.request.size = {MAX_REQUEST_BYTES}")
        # The publisher's leader writes in transactions: a deposed leader's aborted batch must
        # not be copied (Kafka's Java consumer reads uncommitted records by default).
        lines.append(f"{flow.source}.consumer.isolation.level = read_committed")
    lines += [f"{setting} = 1" for setting in SINGLE_BROKER_SETTINGS]
    lines += [
        f"refresh.topics.interval.seconds = {REFRESH_TOPICS_S}",
        # No ACLs on these brokers, and no consumer groups to translate.
        "sync.topic.acls.enabled = false",
        "sync.group.offsets.enabled = false",
    ]
    return "\n".join(lines) + "\n"


@contextmanager
def mirror_maker(
    name: str, clusters: dict[str, str], flows: Sequence[Flow], workdir: Path
) -> Iterator[None]:
    """MirrorMaker 2 running the given flows until the block ends; its files are removed."""
    config = workdir / f"{name}.properties"
    config.write_text(mm2_properties(clusters, flows))
    env = {**os.environ, "SCD_MM2_NAME": name, "SCD_MM2_CONFIG": str(config)}
    run_deploy("mirrormaker.sh", "start", env=env)
    try:
        yield
    finally:
        run_deploy("mirrormaker.sh", "stop", env=env)
        shutil.rmtree(scd_home() / name, ignore_errors=True)
        for leftover in (scd_home() / "logs" / f"{name}.log", scd_home() / "run" / f"{name}.lock"):
            leftover.unlink(missing_ok=True)


class BlobReplicator:
    """Copies every object of bucket ``source`` to bucket ``target`` once the replicator has
    known it for ``lag_s`` (its own clock: the S3 server's timestamps have whole seconds).

    Objects are copied once and never deleted, as S3 replication does with deletions off.
    """

    def __init__(
        self, client: S3Client, source: str, target: str, *, lag_s: float, poll_s: float = 0.2
    ) -> None:
        self.client, self.source, self.target = client, source, target
        self.lag_s, self.poll_s = lag_s, poll_s
        self.seen: dict[str, float] = {}
        self.copied: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="blob-replicator", daemon=True)

    def __enter__(self) -> BlobReplicator:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.step()
            except Exception:  # the server restarting: the next poll tries again
                log.exception("blob replication pass failed; retrying")

    def step(self) -> None:
        now = time.monotonic()
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.source):
            for item in page.get("Contents", []):
                key = item["Key"]
                self.seen.setdefault(key, now)
                if key not in self.copied and now - self.seen[key] >= self.lag_s:
                    self.client.copy_object(
                        Bucket=self.target, Key=key, CopySource={"Bucket": self.source, "Key": key}
                    )
                    self.copied.add(key)


def on_b(topic: str) -> str:
    """The name of A's ``topic`` on B (MirrorMaker's default policy, A's alias "ra")."""
    return f"ra.{topic}"


def on_a(topic: str) -> str:
    """The name of B's ``topic`` on A (B's alias "rb")."""
    return f"rb.{topic}"


def journal_settings(
    kafka: KafkaService, topics: dict[str, str], mirrored: bool = False
) -> JournalSettings:
    """A subscriber's journal settings; ``mirrored``: on B, reading A's topics' copies."""
    names = dict(topics)
    if mirrored:
        names.update({kind: on_b(topics[kind]) for kind in MIRROR_KINDS})
    return JournalSettings(
        backend="kafka",
        bootstrap_servers=kafka.bootstrap,
        topics=TopicSettings.model_validate(names),
    )


def delete_before(bootstrap: str, topic: str, offset: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, offset)]).values():
        future.result(timeout=30)


def wait_records(journal: Journal, topic: str, count: int) -> None:
    deadline = time.monotonic() + MIRROR_TIMEOUT_S
    while True:
        try:
            held = sum(
                journal.latest_offset(topic, p) - journal.earliest_offset(topic, p)
                for p in range(journal.partitions(topic))
            )
            if held >= count:
                return
        except Exception:  # the topic does not exist yet: MirrorMaker creates it
            pass
        assert time.monotonic() < deadline, f"{topic}: fewer than {count} records in time"
        time.sleep(0.2)
