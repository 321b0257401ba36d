"""The queue cache on the embedded journal: tail, head fetch, filtering, recycle, memory."""

from __future__ import annotations

import threading
import time
import tracemalloc
import uuid

import pytest

from journal.api import TopicSpec
from journal.sqlite.journal import SqliteJournal
from journal.wire.messages import PingMessage, ReqType, encode
from publisher.metrics import PublisherMetrics
from publisher.queues.cache import QueueCache
from publisher.queues.entries import EntrySegment
from tests.journal.retention import expire_now
from tests.publisher.packages import PACKAGE_TOPIC, put_packages

# The bound on memory per cached entry (Sling documents ~100 B).
MAX_BYTES_PER_ENTRY = 150


@pytest.fixture
def topic(journal: SqliteJournal) -> str:
    journal.create_topics([TopicSpec(PACKAGE_TOPIC)])
    return PACKAGE_TOPIC


def new_cache(journal: SqliteJournal, topic: str) -> QueueCache:
    return QueueCache(journal, topic, "publish", fetch_timeout_s=10, metrics=PublisherMetrics())


def drain(cache: QueueCache) -> None:
    while cache.poll_tail(0.05):
        pass


def test_tail_caches_only_this_agents_non_test_packages(journal: SqliteJournal, topic: str) -> None:
    cache = new_cache(journal, topic)
    cache.open()
    ours = put_packages(journal, 3)
    put_packages(journal, 2, agent="other-agent")
    put_packages(journal, 2, req_type=ReqType.TEST)
    value, headers = encode(PingMessage())
    journal.send(topic, value, headers=headers)
    drain(cache)
    assert [e.offset for e in cache.items_after(-1)] == ours
    assert cache.next_offset == journal.latest_offset(topic)


def test_garbage_records_are_counted_and_skipped(journal: SqliteJournal, topic: str) -> None:
    cache = new_cache(journal, topic)
    cache.open()
    journal.send(topic, b"\xff\x00garbage", headers={"type": "PackageMessage"})
    journal.send(topic, b"x", headers={"type": "FutureMessage"})
    journal.send(topic, b"no headers")
    put_packages(journal, 1)
    drain(cache)
    assert cache.size == 1
    assert cache.counts["undecodable"] == 1
    assert cache.counts["unknown_type"] == 2
    samples = cache.metrics.skipped_records.labels(topic, "undecodable")._value.get()
    assert samples == 1


def test_head_fetch_fills_older_ranges_once_for_concurrent_callers(
    journal: SqliteJournal, topic: str
) -> None:
    old = put_packages(journal, 2000)
    cache = new_cache(journal, topic)
    cache.open()
    new = put_packages(journal, 5)
    drain(cache)
    assert cache.count_after(-1) == 5
    assert cache.covered_from == 2000

    threads = [threading.Thread(target=cache.ensure, args=(0,)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.metrics.queue_cache_fetch_count._value.get() == 1
    assert [e.offset for e in cache.items_after(-1)] == old + new
    assert cache.count_after(999) == 1005
    assert [e.offset for e in cache.items_after(1990, skip=5, limit=10)] == list(
        range(1996, 2000)
    ) + new
    head = cache.head_after(1999)
    assert head is not None
    assert head[0] == 2000
    assert cache.last_offset_upto(-1, 2003) == 2002
    assert [e.offset for e in cache.entries_between(1997, 2001)] == [1998, 1999, 2000, 2001]
    entry = cache.entry_at(1234)
    assert entry is not None
    assert entry.offset == 1234


def test_fetch_below_the_earliest_retained_offset(journal: SqliteJournal) -> None:
    journal.create_topics([TopicSpec("short", retention_ms=1)])
    put_packages(journal, 5, topic="short")
    time.sleep(0.01)  # older than the 1 ms retention
    expire_now(journal)
    kept = put_packages(journal, 3, topic="short")
    cache = new_cache(journal, "short")
    cache.open()
    cache.ensure(0)
    assert cache.covered_from == 0
    assert [e.offset for e in cache.items_after(-1)] == kept


def test_recycle_drops_what_nobody_needs(journal: SqliteJournal, topic: str) -> None:
    offsets = put_packages(journal, 10)
    cache = new_cache(journal, topic)
    cache.open(from_offset=0)
    drain(cache)
    assert cache.recycle(keep_from=6) == 6
    assert [e.offset for e in cache.items_after(-1)] == offsets[6:]
    assert cache.covered_from == 6
    more = put_packages(journal, 2)
    drain(cache)
    cache.ensure(2)
    assert [e.offset for e in cache.items_after(-1)] == offsets[2:] + more


def test_memory_per_cached_entry() -> None:
    """100,000 entries of a typical package (uuid id, one 40-char path) stay under 150 B each."""
    count = 100_000
    ids = [uuid.uuid4().hex for _ in range(count)]
    paths = [f"/content/site/en/section-{i % 97}/page-{i}" for i in range(count)]
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    segment = EntrySegment()
    for i in range(count):
        segment.append(i, ids[i], ReqType.ADD, (paths[i],), (), 5000, 1_700_000_000_000 + i)
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    per_entry = used / count
    assert per_entry <= MAX_BYTES_PER_ENTRY, per_entry


def test_counts_and_heads_stop_at_a_log_end_read_once(journal: SqliteJournal, topic: str) -> None:
    cache = new_cache(journal, topic)
    cache.open()
    first = put_packages(journal, 3)
    drain(cache)
    upto = cache.next_offset - 1
    later = put_packages(journal, 2)  # the tail grows while an answer is computed
    drain(cache)
    assert cache.count_after(first[0], upto) == 2
    assert cache.count_after(first[0]) == 4
    assert cache.head_after(first[2], upto) is None
    head = cache.head_after(first[2])
    assert head is not None
    assert head[0] == later[0]
    assert cache.count_after(later[-1], upto) == 0
