"""Contract of the journal API: every backend runs this suite unchanged.

A backend's test module subclasses ``JournalContract`` and provides the fixtures ``journal``
(a Journal) and ``new_topic`` (a factory creating a fresh uniquely named topic).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from google.protobuf.message import Message

from journal.api import RECORD_OVERHEAD_BYTES, Journal, OutgoingRecord, Position, Record
from journal.errors import Fenced, MessageTooLarge, UnknownTopic
from journal.messaging import MessagePoller, MessageSender
from journal.wire import messages as m
from tests.services import unique_topics

# A protobuf tag of field 1 with wire type 7, which no parser accepts: garbage that random bytes
# after it cannot turn into a valid message (64 random bytes alone sometimes are one).
NOT_PROTOBUF = b"\x0f"

NewTopic = Callable[..., str]


def read_all(journal: Journal, topic: str, position: Position, expected: int) -> list[Record]:
    """Poll until ``expected`` records arrived and the consumer reached the end of the topic as
    it was when called (or 30 s passed): records beyond the expected count are returned too."""
    ends = {p: journal.latest_offset(topic, p) for p in range(journal.partitions(topic))}
    records: list[Record] = []
    deadline = time.monotonic() + 30
    with journal.consumer(topic, position) as consumer:

        def at_end() -> bool:
            positions = consumer.positions()
            return all(positions.get(p, 0) >= end for p, end in ends.items())

        while (len(records) < expected or not at_end()) and time.monotonic() < deadline:
            records.extend(consumer.poll(0.5))
    return records


def status(offset: int) -> m.PackageStatusMessage:
    return m.PackageStatusMessage(
        sub_sling_id="sub-1",
        sub_agent_name="agent",
        pub_agent_name="pub",
        offset=offset,
        status=m.Status.IMPORTED,
    )


class JournalContract:
    # Retention of the retention test's topic. Kafka deletes on its own schedule (closed
    # segments, checked every few seconds); a backend that expires on demand may use less.
    retention_ms = 1000

    def expire(self, journal: Journal) -> None:
        """Let the backend apply retention now (Kafka does it on its own schedule)."""

    # ------------------------------------------------------------------ send / offsets
    def test_offsets_are_monotonic_and_latest_is_next(
        self, journal: Journal, new_topic: NewTopic
    ) -> None:
        topic = new_topic()
        assert journal.latest_offset(topic) == journal.earliest_offset(topic)
        first = journal.latest_offset(topic)
        offsets = [journal.send(topic, f"v{i}".encode()) for i in range(5)]
        assert offsets == list(range(first, first + 5))
        assert journal.latest_offset(topic) == first + 5
        assert journal.earliest_offset(topic) == first

    def test_a_bulk_send_then_its_waits(self, journal: Journal, new_topic: NewTopic) -> None:
        topic = new_topic()
        pending = [journal.start_send(topic, b"x" * 100) for _ in range(50)]
        offsets = [journal.finish_send(p) for p in pending]
        assert all(p.done for p in pending)
        assert sorted(offsets) == list(range(50))
        assert journal.latest_offset(topic) == 50

    def test_concurrent_sends_each_get_their_own_offset_in_queueing_order(
        self, journal: Journal, new_topic: NewTopic
    ) -> None:
        topic = new_topic()
        lock = threading.Lock()  # queue under a lock, wait outside it, as Sequencer does
        logged: dict[int, bytes] = {}

        def sender(worker: int) -> list[int]:
            offsets = []
            for i in range(25):
                value = f"{worker}:{i}".encode()
                with lock:
                    pending = journal.start_send(topic, value)
                offset = journal.finish_send(pending)
                logged[offset] = value
                offsets.append(offset)
            return offsets

        with ThreadPoolExecutor(8) as pool:
            per_worker = list(pool.map(sender, range(8)))
        assert sorted(logged) == list(range(200))
        assert all(offsets == sorted(offsets) for offsets in per_worker)
        records = read_all(journal, topic, Position.earliest(), 200)
        assert {r.offset: r.value for r in records} == logged

    def test_record_info_round_trips(self, journal: Journal, new_topic: NewTopic) -> None:
        topic = new_topic()
        before_ms = int(time.time() * 1000)
        offset = journal.send(topic, b"\x00\xffpayload", key=b"k1", headers={"type": "T", "x": "é"})
        (record,) = read_all(journal, topic, Position.at(offset), 1)
        assert (record.topic, record.partition, record.offset) == (topic, 0, offset)
        assert record.value == b"\x00\xffpayload"
        assert record.key == b"k1"
        assert record.headers == {"type": "T", "x": "é"}
        assert before_ms - 5000 <= record.timestamp_ms <= int(time.time() * 1000) + 5000

    def test_keyed_sends_stick_to_one_partition(
        self, journal: Journal, new_topic: NewTopic
    ) -> None:
        topic = new_topic(partitions=3)
        assert journal.partitions(topic) == 3
        for i in range(30):
            journal.send(topic, f"{i}".encode(), key=f"agent-{i % 5}".encode())
        records = read_all(journal, topic, Position.earliest(), 30)
        assert len(records) == 30
        by_key: dict[bytes | None, set[int]] = {}
        for r in records:
            by_key.setdefault(r.key, set()).add(r.partition)
        assert all(len(parts) == 1 for parts in by_key.values()), by_key
        # Per partition, offsets increase in the order they were read.
        for p in {r.partition for r in records}:
            offs = [r.offset for r in records if r.partition == p]
            assert offs == sorted(offs)

    # ------------------------------------------------------------------ positions
    def test_positions(self, journal: Journal, new_topic: NewTopic) -> None:
        topic = new_topic()
        for i in range(10):
            journal.send(topic, str(i).encode())

        def values(position: Position, expected: int) -> list[bytes]:
            return [r.value for r in read_all(journal, topic, position, expected)]

        assert values(Position.earliest(), 10) == [str(i).encode() for i in range(10)]
        assert values(Position.at(7), 3) == [b"7", b"8", b"9"]
        assert values(Position.earliest(8), 2) == [b"8", b"9"]
        assert values(Position.latest(-2), 2) == [b"8", b"9"]
        assert values(Position.latest(-100), 10)[0] == b"0"  # clamped to earliest
        assert values(Position.at(1000), 0) == []  # clamped to latest: nothing yet

    def test_positions_follow_every_partition(self, journal: Journal, new_topic: NewTopic) -> None:
        topic = new_topic(partitions=3)
        for i in range(30):
            journal.send(topic, f"{i}".encode(), key=f"agent-{i % 5}".encode())
        ends = {p: journal.latest_offset(topic, p) for p in range(3)}
        read = 0
        with journal.consumer(topic, Position.earliest()) as consumer:
            deadline = time.monotonic() + 30
            while read < 30 and time.monotonic() < deadline:
                # Small batches, so the positions move over several polls.
                read += len(consumer.poll(0.5, max_records=7))
            assert read == 30
            assert consumer.positions() == ends

    def test_poll_waits_for_the_first_record_only(
        self, journal: Journal, new_topic: NewTopic
    ) -> None:
        topic = new_topic()
        for i in range(3):
            journal.send(topic, f"{i}".encode())
        timeout_s = 10.0
        read: list[bytes] = []
        started = time.monotonic()
        with journal.consumer(topic, Position.earliest()) as consumer:
            while len(read) < 3 and time.monotonic() - started < 3 * timeout_s:
                read.extend(r.value for r in consumer.poll(timeout_s, max_records=1000))
        # Asking for far more records than exist must not wait out the timeout.
        assert read == [b"0", b"1", b"2"]
        assert time.monotonic() - started < timeout_s

    def test_latest_sees_only_new_records(self, journal: Journal, new_topic: NewTopic) -> None:
        topic = new_topic()
        journal.send(topic, b"old")
        with journal.consumer(topic, Position.latest()) as consumer:
            assert consumer.poll(0.3) == []
            journal.send(topic, b"new")
            got: list[Record] = []
            deadline = time.monotonic() + 15
            while not got and time.monotonic() < deadline:
                got = consumer.poll(0.5)
            assert [r.value for r in got] == [b"new"]
            assert consumer.positions() == {0: 2}

    def test_seek(self, journal: Journal, new_topic: NewTopic) -> None:
        topic = new_topic()
        for i in range(5):
            journal.send(topic, str(i).encode())
        with journal.consumer(topic, Position.latest()) as consumer:
            consumer.seek(0, 3)
            got: list[Record] = []
            deadline = time.monotonic() + 15
            while len(got) < 2 and time.monotonic() < deadline:
                got.extend(consumer.poll(0.5))
            assert [r.offset for r in got] == [3, 4]

    # ------------------------------------------------------------------ topics
    def test_create_topics_is_idempotent(self, journal: Journal, new_topic: NewTopic) -> None:
        topic = new_topic(partitions=2)
        journal.send(topic, b"kept")
        from journal.api import TopicSpec

        journal.create_topics([TopicSpec(topic, partitions=2)])
        assert journal.partitions(topic) == 2
        assert journal.latest_offset(topic, 0) + journal.latest_offset(topic, 1) == 1

    def test_unknown_topic(self, journal: Journal) -> None:
        with pytest.raises(UnknownTopic):
            journal.partitions(f"no-such-topic-{os.getpid()}-{time.time_ns()}")

    def test_retention_deletes_old_records_offsets_keep_growing(
        self, journal: Journal, new_topic: NewTopic
    ) -> None:
        topic = new_topic(retention_ms=self.retention_ms)
        for i in range(3):
            journal.send(topic, str(i).encode())
        deadline = time.monotonic() + 60
        while journal.earliest_offset(topic) < 3 and time.monotonic() < deadline:
            # A later record closes the old segment (Kafka deletes closed segments only).
            journal.send(topic, b"later")
            self.expire(journal)
            time.sleep(0.1)
        assert journal.earliest_offset(topic) >= 3
        latest = journal.latest_offset(topic)
        assert latest >= 3
        assert journal.send(topic, b"next") == latest  # offsets are never reused

    # ------------------------------------------------------------------ limits
    def test_too_large_is_refused_before_sending(
        self, journal: Journal, new_topic: NewTopic
    ) -> None:
        limit = 64 * 1024
        topic = new_topic(max_message_bytes=limit)
        assert journal.max_message_bytes(topic) == limit
        with pytest.raises(MessageTooLarge) as info:
            journal.send(topic, b"x" * limit)
        assert info.value.limit == limit
        assert info.value.size > limit
        assert str(limit) in str(info.value)
        assert str(info.value.size) in str(info.value)
        assert journal.latest_offset(topic) == 0  # nothing was sent
        # The largest record the check lets through is accepted end to end.
        largest = b"y" * (limit - RECORD_OVERHEAD_BYTES)
        offset = journal.send(topic, largest)
        (record,) = read_all(journal, topic, Position.at(offset), 1)
        assert record.value == largest

    # ------------------------------------------------------------------ fenced writers
    def test_a_new_fenced_writer_fences_the_old_one_which_then_writes_nothing(
        self, journal: Journal, new_topic: NewTopic, unique_name: str
    ) -> None:
        topic = new_topic(max_message_bytes=64 * 1024)
        key = b"agent"
        first = journal.fenced_writer(f"{unique_name}-events")
        first.write(topic, [OutgoingRecord(f"a{i}".encode(), key, {"n": str(i)}) for i in range(3)])
        second = journal.fenced_writer(f"{unique_name}-events")
        with pytest.raises(Fenced):
            first.write(topic, [OutgoingRecord(b"zombie", key)])
        other = journal.fenced_writer(f"{unique_name}-other")  # another id fences nothing
        second.write(topic, [OutgoingRecord(b"b0", key)])
        other.write(topic, [OutgoingRecord(b"c0", key)])
        with pytest.raises(MessageTooLarge):  # refused whole: b1 is not written either
            second.write(topic, [OutgoingRecord(b"b1", key), OutgoingRecord(b"x" * 64 * 1024)])
        for writer in (first, second, other):
            writer.close()

        records = read_all(journal, topic, Position.earliest(), 5)
        assert [r.value for r in records] == [b"a0", b"a1", b"a2", b"b0", b"c0"]
        assert records[1].headers == {"n": "1"}
        assert records[1].key == key
        # A reader at the end is past everything written, transaction markers included.
        with journal.consumer(topic, Position.at(records[-1].offset)) as consumer:
            deadline = time.monotonic() + 30
            while consumer.positions()[0] < journal.latest_offset(topic):
                assert time.monotonic() < deadline, "the reader stopped short of the end"
                consumer.poll(0.2)

    # ------------------------------------------------------------------ typed messaging
    def test_poller_skips_garbage_and_unknown_types(
        self, journal: Journal, new_topic: NewTopic
    ) -> None:
        topic = new_topic()
        sender = MessageSender(journal, topic)
        sender.send(status(1))
        for name in m.MESSAGE_TYPES:
            if name != "PingMessage":  # every byte string is a valid empty PingMessage
                journal.send(
                    topic, NOT_PROTOBUF + os.urandom(63), headers={"type": name, "version": "1"}
                )
        journal.send(topic, b"whatever", headers={"type": "FutureMessage", "version": "9"})
        journal.send(topic, b"no headers at all")
        sender.send(status(2))

        seen: list[tuple[int, int]] = []
        poller = MessagePoller(
            journal,
            topic,
            Position.earliest(),
            {m.PackageStatusMessage: lambda msg, rec: seen.append((msg.offset, rec.offset))},
        )
        deadline = time.monotonic() + 30
        while len(seen) < 2 and time.monotonic() < deadline:
            poller.poll_once()
        poller.stop()
        garbage = len(m.MESSAGE_TYPES) - 1
        assert [s[0] for s in seen] == [1, 2]
        assert seen[1][1] == garbage + 3  # the record after all the garbage
        assert poller.counts["undecodable"] == garbage
        assert poller.counts["unknown_type"] == 2
        assert poller.counts["delivered"] == 2

    def test_poller_thread_and_handler_errors(self, journal: Journal, new_topic: NewTopic) -> None:
        topic = new_topic()
        sender = MessageSender(journal, topic)
        got: list[int] = []

        def handle(msg: m.PackageStatusMessage, _rec: Record) -> None:
            if msg.offset == 1:
                raise RuntimeError("handler bug")
            got.append(msg.offset)

        poller = MessagePoller(
            journal, topic, Position.earliest(), {m.PackageStatusMessage: handle}
        )
        poller.start()
        try:
            for i in range(1, 4):
                sender.send(status(i))
            deadline = time.monotonic() + 30
            while len(got) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            poller.stop()
        assert got == [2, 3]
        assert poller.counts["handler_error"] == 1


def sample_messages() -> dict[str, Message]:
    """One valid message of each protobuf type the journal's topics carry."""
    return {
        "package": m.PackageMessage(
            pub_sling_id="p", pkg_id="k", req_type=m.ReqType.ADD, pkg_type="scd-content"
        ),
        "status": status(1),
        "discovery": m.DiscoveryMessage(
            sub_sling_id="s",
            sub_agent_name="a",
            subscriber_configuration=m.SubscriberConfiguration(editable=False, max_retries=-1),
        ),
        "command": m.CommandMessage(
            sub_sling_id="s", sub_agent_name="a", clear_command=m.ClearCommand(offset=3)
        ),
    }


class GarbageOnEveryTopic:
    """Bytes that are no message (NOT_PROTOBUF, then random) under a known type, and unknown
    types, on each journal topic: a poller logs, counts and skips them and delivers the next
    record."""

    def test_garbage_on_every_design_topic(self, journal: Journal, unique_name: str) -> None:
        from journal.settings import JournalSettings, TopicSettings
        from journal.topics import topic_specs

        names = unique_topics(unique_name)
        settings = JournalSettings(topics=TopicSettings.model_validate(names))
        journal.create_topics(topic_specs(settings))
        for kind, message in sample_messages().items():
            topic = names[kind]
            sender = MessageSender(journal, topic)
            name = message.DESCRIPTOR.name
            key = "a" if kind in ("discovery", "command") else None
            journal.send(
                topic,
                NOT_PROTOBUF + os.urandom(47),
                key=b"a",
                headers={"type": name, "version": "1"},
            )
            journal.send(topic, b"\x08\x01", key=b"a", headers={"type": "NotAType", "version": "1"})
            sender.send(message, key=key)
            seen: list[Message] = []

            def collect(msg: Message, _: Record, into: list[Message] = seen) -> None:
                into.append(msg)

            poller = MessagePoller(journal, topic, Position.earliest(), {type(message): collect})
            deadline = time.monotonic() + 30
            while not seen and time.monotonic() < deadline:
                poller.poll_once()
            poller.stop()
            assert seen == [message], kind
            assert poller.counts["undecodable"] == 1, (kind, poller.counts)
            assert poller.counts["unknown_type"] == 1, (kind, poller.counts)
