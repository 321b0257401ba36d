"""Hostile records against the publisher's journal readers, one fresh embedded journal per
example (so that Hypothesis shrinks a failure to the records that cause it):

* the queue cache's tail reads any package-topic record without raising (an exception there
  would end, or crash-loop, the thread every queue depends on), and still caches the valid
  package written after the garbage;
* the distributed-events read-back, which a new leader runs over the event topic, survives any
  record there, and never resumes from an offset the package log does not have (every field
  is sanity-checked; a forged event must not stop the events of every package).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from blobstore.local import LocalBlobStore
from journal.settings import JournalSettings
from journal.sqlite.journal import SqliteJournal
from journal.topics import topic_specs
from journal.wire import messages as m
from publisher.agent import PublisherAgent
from tests.fuzz import records as r
from tests.publisher.conftest import publisher_settings

AGENT = "publish"
AGENTS = [AGENT, "other"]
# Each example opens an embedded journal and builds an agent (a few ms); 150 examples keep
# each property within half a minute on a loaded machine.
EXAMPLES = 150

fuzz_settings = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@contextmanager
def unstarted_agent() -> Iterator[PublisherAgent]:
    """A publisher agent (threads not started) on a fresh embedded journal, topics created."""
    with tempfile.TemporaryDirectory(prefix="scd-fuzz-") as tmp:
        js = JournalSettings(backend="sqlite", sqlite_path=Path(tmp) / "journal.db")
        journal = SqliteJournal(js.sqlite_path)
        try:
            journal.create_topics(topic_specs(js))
            blobs = LocalBlobStore(Path(tmp) / "blobs")
            yield PublisherAgent(publisher_settings(agent_name=AGENT), js, journal, blobs)
        finally:
            journal.close()


def _valid_package(agent: str) -> r.Garbage:
    message = m.PackageMessage(
        pub_sling_id="pub",
        pub_agent_name=agent,
        pkg_id="valid-after-garbage",
        req_type=m.ReqType.DELETE,
        pkg_type=r.PACKAGE_TYPE,
        deep_paths=["/fuzz-check"],
        paths=["/fuzz-check"],
    )
    value, _ = m.encode(message)
    return r.Garbage("package", value, r.typed("PackageMessage"), what="valid package")


@fuzz_settings
@given(batch=st.lists(r.garbage(AGENTS, kinds=["package"]), min_size=1, max_size=6))
def test_the_queue_cache_reads_any_package_record_and_caches_the_next_package(
    batch: list[r.Garbage],
) -> None:
    note(repr(batch))
    with unstarted_agent() as agent:
        r.send_records(agent.journal, r.topic_names(agent.topics), [*batch, _valid_package(AGENT)])
        end = agent.journal.latest_offset(agent.topics.package)
        agent.cache.open(0)
        while agent.cache.next_offset < end:
            agent.cache.poll_tail(0.05)
        valid = agent.cache.entry_at(end - 1)
        assert valid is not None, "the valid package after the garbage is not cached"
        assert valid.package_id == "valid-after-garbage"
        for entry in agent.cache.items_after(-1):  # what queue pages show: every entry reads
            assert entry.offset < end


def _read_back_after(batch: list[r.Garbage]) -> tuple[int | None, int]:
    """The offset a new leader resumes after, with ``batch`` on the event topic, and the end
    of the package log (two packages of this agent on it)."""
    with unstarted_agent() as agent:
        r.send_records(agent.journal, r.topic_names(agent.topics), [_valid_package(AGENT)] * 2)
        r.send_records(agent.journal, r.topic_names(agent.topics), batch)
        return agent.events.read_back(), agent.journal.latest_offset(agent.topics.package)


event_batches = st.lists(
    st.one_of(r.event_records(AGENTS), r.garbage(AGENTS, kinds=["event"])),
    min_size=1,
    max_size=5,
)


@fuzz_settings
@given(batch=event_batches)
def test_the_event_read_back_survives_any_event_topic_record(batch: list[r.Garbage]) -> None:
    note(repr(batch))
    _read_back_after(batch)


@fuzz_settings
@given(batch=event_batches)
def test_the_event_read_back_never_resumes_beyond_the_package_log(
    batch: list[r.Garbage],
) -> None:
    """Resuming beyond the log's end would send no event for any package until the log grows
    past the forged offset: never, for an offset like 2**63-1. -1 is a legitimate start point
    (subscribers that processed nothing yet)."""
    note(repr(batch))
    resumes_after, end = _read_back_after(batch)
    assert resumes_after is None or -1 <= resumes_after < end, (
        f"a new leader resumes events after offset {resumes_after}; the package log ends at {end}"
    )
