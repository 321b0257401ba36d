"""Subscribers of another region (docs/regions.md): their announced sequence numbers mapped to
the publisher's own offsets through the queue cache (publisher/queues/positions.py), on the
embedded journal. A remote subscriber reads a copy whose offsets are shifted by ``SHIFT``."""

from __future__ import annotations

import time
import uuid

import pytest
from pydantic import ValidationError

from journal.api import Record, TopicSpec
from journal.messaging import MessageSender
from journal.sqlite.journal import SqliteJournal
from journal.wire.messages import (
    DiscoveryMessage,
    LogMessage,
    PackageStatusMessage,
    ReqType,
    Status,
    SubscriberConfiguration,
    SubscriberState,
)
from publisher.discovery import DiscoveryView, Subscriber
from publisher.distributed_events import DistributedEvents
from publisher.errors import BadRecord
from publisher.metrics import PublisherMetrics
from publisher.queues.cache import QueueCache
from publisher.queues.error_queues import ErrorQueues
from publisher.queues.positions import package_offset
from publisher.queues.views import Queues, QueueSummary
from publisher.settings import MAX_REMOTE_REGIONS, PublisherSettings
from tests.journal.retention import expire_now
from tests.publisher.packages import PACKAGE_TOPIC, package_message

AGENT = "publish"
# Region B's copy holds every record this many offsets above the publisher's log (batches
# MirrorMaker delivered twice, or B's own records on the topic before mirroring began).
SHIFT = 7
NOW_MS = 1_700_000_100_000


class Region:
    """The publisher's log, cache, discovery view, error queues and queues."""

    def __init__(self, journal: SqliteJournal, topic: str = PACKAGE_TOPIC) -> None:
        self.journal = journal
        self.topic = topic
        self.sender = MessageSender(journal, topic)
        self.offsets: dict[int, int] = {}  # sequence -> offset on the publisher's log
        self.cache = QueueCache(
            journal, topic, AGENT, fetch_timeout_s=10, metrics=PublisherMetrics()
        )
        self.discovery = DiscoveryView(ttl_s=30, clock_ms=lambda: NOW_MS)
        self.errors = ErrorQueues(AGENT, locate=lambda n: package_offset(self.cache, n))
        self.queues = Queues(
            self.cache,
            self.discovery,
            self.errors,
            agent_name=AGENT,
            topic=topic,
            blocked_after_attempts=3,
            clock_ms=lambda: NOW_MS,
        )

    def send(self, first: int, last: int, **kw: object) -> list[int]:
        """Packages numbered ``first``..``last`` (a TEST package numbered in between: it
        takes a number but is never a queue item)."""
        out = []
        for number in range(first, last + 1):
            message = package_message(**kw, created_ms=NOW_MS - 1000)  # type: ignore[arg-type]
            message.sequence = number
            if number % 4 == 0:
                message.req_type = ReqType.TEST
            self.offsets[number] = offset = self.sender.send(message)
            out.append(offset)
        return out

    def drain(self) -> None:
        while self.cache.poll_tail(0.05):
            pass

    def announce(
        self, name: str, offset: int, sequence: int, *, remote: bool, retries: int = 0
    ) -> None:
        message = DiscoveryMessage(
            sub_sling_id=name,
            sub_agent_name="sub",
            subscriber_configuration=SubscriberConfiguration(editable=True, max_retries=-1),
        )
        message.subscriber_state.append(
            SubscriberState(pub_agent_name=AGENT, offset=offset, retries=retries, sequence=sequence)
        )
        record = Record("d", 0, 0, NOW_MS, b"sub", {}, b"")
        (self.discovery.handle_remote if remote else self.discovery.handle)(message, record)

    def fetches(self) -> float:
        return float(self.cache.metrics.queue_cache_fetch_count._value.get())


def shape(summary: QueueSummary) -> tuple[object, ...]:
    """What a queue shows of its packages."""
    return (
        summary.size,
        summary.head_offset,
        summary.lag_ms,
        summary.state,
    )


@pytest.fixture
def region(journal: SqliteJournal) -> Region:
    journal.create_topics([TopicSpec(PACKAGE_TOPIC)])
    region = Region(journal)
    region.sender.send(package_message(agent="other"))  # not this agent's: never queued
    region.send(1, 12)
    region.cache.open(0)
    region.drain()
    return region


def test_a_local_subscriber_keeps_its_offset_whatever_number_it_announces(
    region: Region,
) -> None:
    at = region.offsets[5]
    region.announce("plain", at, 0, remote=False)
    region.announce("numbered", at, 9, remote=False)
    region.announce("forged", at, 2**63 - 1, remote=False)
    plain, numbered, forged = (
        region.queues.summary(f"{n}-sub") for n in ("plain", "numbered", "forged")
    )
    assert shape(numbered) == shape(plain) == shape(forged)
    assert plain.processed_offset == numbered.processed_offset == forged.processed_offset == at
    assert plain.size == 5  # 6, 7, 9, 10, 11: 8 and 12 are TEST packages


def test_a_remote_subscriber_shifted_by_n_has_the_queue_of_a_local_one_at_its_number(
    region: Region,
) -> None:
    for number in range(1, 13):
        at = region.offsets[number]
        region.announce("local", at, number, remote=False)
        region.announce("remote", at + SHIFT, number, remote=True)
        local = region.queues.summary("local-sub")
        remote = region.queues.summary("remote-sub")
        assert shape(remote) == shape(local), number
        # A TEST package is never cached: the one numbered before it stands for it, or the
        # cache's end when none is numbered after it (12: caught up).
        if number < 12:
            assert remote.processed_offset == region.offsets[number - (number % 4 == 0)]
        else:
            assert remote.processed_offset == region.cache.next_offset - 1
        expected = [region.offsets[n] for n in range(number + 1, 13) if n % 4]
        assert [e.offset for e in region.queues.items("remote-sub", 0, 20)] == expected
    (queue,) = [s for s in region.queues.summaries() if s.name == "remote-sub"]
    assert queue.size == 0


def test_a_remote_subscriber_without_a_number_keeps_its_copys_offset(region: Region) -> None:
    region.announce("remote", region.offsets[3] + SHIFT, 0, remote=True)
    assert region.queues.summary("remote-sub").processed_offset == region.offsets[3] + SHIFT


def test_a_number_above_anything_sent_is_caught_up(region: Region) -> None:
    for number in (13, 10**6, 2**63 - 1):
        region.announce("ahead", 0, number, remote=True)
        summary = region.queues.summary("ahead-sub")
        assert summary.size == 0
        assert summary.head_offset is None
        assert summary.processed_offset == region.cache.next_offset - 1


def test_a_negative_number_is_a_bad_record(region: Region) -> None:
    with pytest.raises(BadRecord, match="sequence -1 is negative"):
        region.announce("neg", 0, -1, remote=True)
    assert region.discovery.get("neg-sub") is None


def test_a_number_below_the_cache_fetches_the_retained_log_once(journal: SqliteJournal) -> None:
    journal.create_topics([TopicSpec(PACKAGE_TOPIC)])
    region = Region(journal)
    region.send(1, 6)
    region.cache.open()  # a restarted publisher: its cache starts at the log's end
    region.send(7, 10)
    region.drain()
    assert region.cache.numbers() == (7, 10)
    region.announce("behind", 0, 2, remote=True)
    for _ in range(3):
        summary = region.queues.summary("behind-sub")
        assert summary.processed_offset == region.offsets[2]
        assert summary.head_offset == region.offsets[3]
        assert summary.size == 6  # 3, 5, 6, 7, 9, 10
    assert region.fetches() == 1


def test_a_number_whose_packages_left_the_log_shows_every_retained_package(
    journal: SqliteJournal,
) -> None:
    journal.create_topics([TopicSpec("short", retention_ms=1)])
    region = Region(journal, "short")
    region.send(1, 5)
    time.sleep(0.01)  # older than the 1 ms retention
    expire_now(journal)
    kept = region.send(6, 10)
    region.cache.open()
    region.announce("gone", 0, 2, remote=True)
    for _ in range(2):
        summary = region.queues.summary("gone-sub")
        assert summary.head_offset == kept[0]
        assert summary.size == 4  # 6, 7, 9, 10
        assert summary.processed_offset == kept[0] - 1
    assert region.fetches() == 1


def test_a_copied_record_on_the_publishers_log_does_not_move_the_mapping(region: Region) -> None:
    copy = package_message()
    copy.sequence = 3
    copied_at = region.sender.send(copy)  # appended by someone with write access
    region.drain()
    region.announce("remote", 0, 5, remote=True)
    region.announce("local", region.offsets[5], 5, remote=False)
    remote, local = region.queues.summary("remote-sub"), region.queues.summary("local-sub")
    assert shape(remote) == shape(local)
    assert remote.processed_offset == region.offsets[5]
    assert [e.offset for e in region.queues.items("remote-sub", 0, 20)][-1] == copied_at


def status(number: int, offset: int) -> PackageStatusMessage:
    return PackageStatusMessage(
        sub_sling_id="remote",
        sub_agent_name="sub",
        pub_agent_name=AGENT,
        offset=offset,
        status=Status.REMOVED_FAILED,
        sequence=number,
    )


def log_message(number: int, offset: int) -> LogMessage:
    return LogMessage(
        pub_agent_name=AGENT,
        sub_sling_id="remote",
        sub_agent_name="sub",
        message="permanent: broken",
        offset=offset,
        pkg_id=uuid.uuid4().hex,
        sequence=number,
    )


def test_remote_failures_land_at_the_publishers_offset_of_their_number(region: Region) -> None:
    record = Record("s", 0, 0, NOW_MS, b"", {}, b"")
    region.errors.handle_remote_status(status(5, region.offsets[5] + SHIFT), record)
    region.errors.handle_remote_log(log_message(5, region.offsets[5] + SHIFT), record)
    region.errors.handle_status(status(9, region.offsets[9]), record)  # local: as reported
    assert region.errors.offsets("remote-sub") == [region.offsets[5], region.offsets[9]]
    error = region.errors.last_error("remote-sub", region.offsets[5])
    assert error is not None
    assert error.message == "permanent: broken"
    region.errors.handle_remote_status(status(0, 2), record)  # no number: the copy's offset
    assert region.errors.offsets("remote-sub")[0] == 2
    for message in (status(10**9, 1), log_message(10**9, 1)):
        handle = (
            region.errors.handle_remote_status
            if isinstance(message, PackageStatusMessage)
            else region.errors.handle_remote_log
        )
        with pytest.raises(BadRecord, match="not on the publisher's retained log"):
            handle(message, record)  # type: ignore[arg-type]
    with pytest.raises(BadRecord, match="negative"):
        region.errors.handle_remote_status(status(-4, 1), record)
    assert region.errors.size("remote-sub") == 3


def test_distributed_events_wait_for_a_remote_subscriber_by_its_number(region: Region) -> None:
    events = DistributedEvents(
        region.journal,
        "scd.event",
        region.cache,
        region.discovery,
        agent_name=AGENT,
        instance_id="pub",
        metrics=PublisherMetrics(),
    )
    region.announce("local", region.offsets[10], 10, remote=False)
    # Read raw, the copy's offset of package 3 would count packages after 3 as processed by
    # every subscriber: their events would go out before the remote subscriber imported them.
    region.announce("remote", region.offsets[3] + SHIFT, 3, remote=True)
    assert events.min_processed_offset() == region.offsets[3]


def test_remote_topic_prefixes_are_validated() -> None:
    settings = PublisherSettings(dev_mode=True, remote_topic_prefixes="rb., rc.")  # type: ignore[arg-type]
    assert settings.remote_topic_prefixes == ["rb.", "rc."]
    assert PublisherSettings(dev_mode=True).remote_topic_prefixes == []
    too_many = ",".join(f"r{i}." for i in range(MAX_REMOTE_REGIONS + 1))
    for value, error in (
        ("rb.,rb.", "more than once"),
        ("r b.", "characters of a Kafka topic name"),
        ("x" * 101, "characters of a Kafka topic name"),
        (too_many, f"at most {MAX_REMOTE_REGIONS} items"),
    ):
        with pytest.raises(ValidationError, match=error):
            PublisherSettings(dev_mode=True, remote_topic_prefixes=value)  # type: ignore[arg-type]


def test_the_mapping_survives_a_recycle_and_a_later_head_fetch(region: Region) -> None:
    region.cache.recycle(region.offsets[6])
    assert region.cache.numbers() == (6, 11)
    region.announce("remote", 0, 9, remote=True)
    assert region.queues.summary("remote-sub").processed_offset == region.offsets[9]
    region.announce("remote", 0, 2, remote=True)  # below the recycled window: fetched again
    summary = region.queues.summary("remote-sub")
    assert summary.processed_offset == region.offsets[2]
    assert summary.size == 7  # 3, 5, 6, 7, 9, 10, 11
    assert region.cache.numbers() == (1, 11)


def test_one_answer_shows_every_queue_on_one_log_end_while_the_tail_grows(
    region: Region, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, number in (("a", 2), ("b", 6), ("c", 10)):
        region.announce(name, region.offsets[number], 0, remote=False)
    grown: list[int] = []
    summary = Queues._summary

    def grows_between(
        queues: Queues, subscriber: Subscriber, processed: int | None, upto: int
    ) -> QueueSummary:
        if not grown:  # a package arrives after the first queue was computed
            grown.extend(region.send(13, 13))
            region.drain()
        return summary(queues, subscriber, processed, upto)

    monkeypatch.setattr(Queues, "_summary", grows_between)
    _, summaries = region.queues.page()
    assert grown
    assert region.cache.next_offset > grown[0]
    # Non-TEST packages above each one's number, up to 12: the log end when the answer began.
    assert {s.name: s.size for s in summaries} == {"a-sub": 7, "b-sub": 4, "c-sub": 1}
    monkeypatch.undo()
    _, after = region.queues.page()
    assert {s.name: s.size for s in after} == {"a-sub": 8, "b-sub": 5, "c-sub": 2}
