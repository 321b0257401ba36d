"""What the container tests read back from the compose cluster, from this machine: the package
topic (Kafka's published port), each subscriber's Delta log (its commit files on the S3
server's published port) and its content (a local SparkSession reading the s3a:// table).
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

from journal.api import Position
from journal.kafka.journal import KafkaJournal
from journal.wire import messages as m
from tests.containers.compose import Endpoints
from tests.services import last_record_offset

READ_TIMEOUT_S = 60.0
S3_TIMEOUT_S = 10.0
PACKAGE_TOPIC = "scd.package"


def s3_client(endpoints: Endpoints) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoints.s3_endpoint,
        aws_access_key_id=endpoints.s3_access_key,
        aws_secret_access_key=endpoints.s3_secret_key,
        region_name=endpoints.s3_region,
        config=Config(
            connect_timeout=S3_TIMEOUT_S,
            read_timeout=S3_TIMEOUT_S,
            retries={"max_attempts": 3},
        ),
    )


@dataclass(frozen=True)
class Commit:
    """One commit of a Delta table, from its ``_delta_log/<version>.json``."""

    version: int
    timestamp_ms: int
    operation: str
    metadata: dict[str, Any] | None

    @property
    def offsets(self) -> tuple[int, int] | None:
        """The package offsets an import commit covers (first, last)."""
        if not self.metadata or "offsets" not in self.metadata:
            return None
        first, last = self.metadata["offsets"]
        return int(first), int(last)


def delta_commits(s3: Any, bucket: str, table: str) -> list[Commit]:
    """Every commit file still in the table's log, oldest first."""
    prefix = f"{table.rstrip('/')}/_delta_log/"
    keys = [
        item["Key"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for item in page.get("Contents", [])
        if item["Key"].endswith(".json") and item["Key"][len(prefix) :][:-5].isdigit()
    ]
    commits = []
    for key in keys:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
        for line in body.splitlines():
            action = json.loads(line) if line.strip() else {}
            info = action.get("commitInfo")
            if info is not None:
                text = info.get("userMetadata")
                commits.append(
                    Commit(
                        int(key[len(prefix) : -5]),
                        int(info.get("timestamp", 0)),
                        str(info.get("operation", "")),
                        json.loads(text) if text else None,
                    )
                )
    return sorted(commits, key=lambda c: c.version)


def import_ranges(commits: list[Commit]) -> list[tuple[int, int, int]]:
    """(first offset, last offset, version) of every commit that recorded offsets."""
    return [(*c.offsets, c.version) for c in commits if c.offsets is not None]


def check_each_offset_once(name: str, commits: list[Commit], last: int) -> int:
    """The commits recording offsets cover contiguous, non-overlapping ranges up to ``last``:
    no offset imported twice, none skipped. Returns how many there are."""
    ranges = import_ranges(commits)
    assert ranges, f"{name}: no import commit in the Delta log"
    for (_, prev_last, prev_version), (first, _, version) in itertools.pairwise(ranges):
        # Never twice; offsets between two commits are the leader's transaction markers (a
        # package skipped there would show in the content compared with the model).
        assert first > prev_last, (
            f"{name}: commit {version} starts at offset {first} after commit {prev_version} "
            f"ended at {prev_last} (imported twice)"
        )
    if commits[0].version == 0:  # the log is complete: it starts at the start position
        assert ranges[0][0] <= 0, f"{name}: the first commit starts at offset {ranges[0][0]}"
    assert ranges[-1][1] == last, f"{name}: the last import commit ends at {ranges[-1][1]}"
    return len(ranges)


@dataclass(frozen=True)
class LoggedPackage:
    offset: int
    pkg_id: str
    metadata: dict[str, str]
    created_ms: int
    spilled: bool
    agent: str = ""
    sequence: int = 0  # the agent's number (journal/sequence.py): one by one in log order


def read_packages(
    bootstrap: str, topic: str = PACKAGE_TOPIC, since: int = 0
) -> list[LoggedPackage]:
    """Every package on the topic from offset ``since`` on, in offset order."""
    journal = KafkaJournal(bootstrap)
    try:
        end = journal.latest_offset(topic)
        found: list[LoggedPackage] = []
        if end <= since:
            return found
        with journal.consumer(topic, Position.at(since)) as consumer:
            deadline = time.monotonic() + READ_TIMEOUT_S
            while consumer.positions().get(0, 0) < end:
                if time.monotonic() > deadline:
                    raise AssertionError(f"could not read {topic} to its end {end}")
                for record in consumer.poll(1.0):
                    if record.offset >= end:
                        continue
                    message = m.decode(dict(record.headers), record.value)
                    assert isinstance(message, m.PackageMessage), f"{record.offset}: {message}"
                    found.append(
                        LoggedPackage(
                            record.offset,
                            message.pkg_id,
                            dict(message.metadata),
                            int(message.created_ms),
                            bool(message.pkg_binary_ref),
                            message.pub_agent_name,
                            int(message.sequence),
                        )
                    )
        return sorted(found, key=lambda p: p.offset)
    finally:
        journal.close()


def latest_offset(bootstrap: str, topic: str = PACKAGE_TOPIC) -> int:
    """The offset the next package gets."""
    journal = KafkaJournal(bootstrap)
    try:
        return journal.latest_offset(topic)
    finally:
        journal.close()


def last_package_offset(bootstrap: str, topic: str = PACKAGE_TOPIC) -> int:
    """The offset of the last package (the leader's transaction markers follow it)."""
    journal = KafkaJournal(bootstrap)
    try:
        return last_record_offset(journal, topic)
    finally:
        journal.close()
