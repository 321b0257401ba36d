"""Where a new subscriber starts is fixed when its process starts, not once its store opened.

A subscriber with reset=latest whose store takes long to open (an s3a store on a loaded
machine: tens of seconds) used to resolve "latest" only once the store had opened, so every
package distributed in between was skipped, with nothing saying so. Here the store's opening is
held back until packages were sent (a real Delta store on real Kafka, opened through the
agent's own threads, with the start fixed the way the daemon fixes it): they are imported, the
ones sent before the process started are not, and the announcement puts them in its queue.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from subscriber.agent import SubscriberAgent
from subscriber.bookkeeper.behind_log import reset_position
from subscriber.store.base import StoreState
from subscriber.store.delta import DeltaStore
from subscriber.writer.lease import WriterLease, lease_object, new_owner
from tests.subscriber import harness as h
from tests.subscriber.unit.test_behind_log import good
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

# How long the store's opening is held back at most (the test releases it much earlier).
HOLD_TIMEOUT_S = 120.0
IMPORT_TIMEOUT_S = 120.0


class SlowOpeningStore(DeltaStore):
    """A Delta store whose ``open`` waits until the test lets it (an s3a store opening slowly,
    made deterministic)."""

    def __init__(self, spark: Any, location: str) -> None:
        super().__init__(spark, location)
        self.opening = threading.Event()  # set when the import loop started opening it
        self.release = threading.Event()

    def open(self) -> StoreState:
        self.opening.set()
        assert self.release.wait(HOLD_TIMEOUT_S), "the test never released the store"
        return super().open()


def test_packages_sent_while_a_new_store_opens_are_imported(
    env: h.Env, spark: Any, tmp_path: Path
) -> None:
    before = [env.send(good(f"before{i}")) for i in range(2)]
    settings = h.subscriber_settings(env.js, env.bs, tmp_path / "store", reset="latest")
    start = reset_position(env.journal, settings)  # what the daemon does first
    assert start == before[-1] + 1
    store = SlowOpeningStore(spark, settings.store_path)
    # As the daemon runs it: with its writer lease, the import loop opens the store.
    lease = WriterLease(
        lease_object(settings.store_path, settings.blobstore),
        new_owner(settings.agent_name),
        settings.writer_lease_ttl_s,
        settings.writer_lease_renew_s,
    )
    agent = SubscriberAgent(
        settings, env.journal, store, env.blobs, lease=lease, start_offset=start
    )
    assert agent.holds_position
    assert agent.health().start_offset == start
    agent.start()
    try:
        assert store.opening.wait(IMPORT_TIMEOUT_S)
        during = [env.send(good(f"during{i}")) for i in range(4)]
        assert agent.health().holds_position
        store.release.set()
        wait_for(
            lambda: agent.processed_offset >= during[-1],
            IMPORT_TIMEOUT_S,
            f"the subscriber to import offset {during[-1]}",
        )
    finally:
        store.release.set()
        agent.stop()
    paths = h.stored_paths(store)
    assert {f"/during{i}" for i in range(4)} <= paths
    assert not {"/before0", "/before1"} & paths
    assert agent.counters.imported == 4
    reasons = [c["metadata"].get("reason", "") for c in store.history() if c["metadata"]]
    assert "new store, reset to latest at process start" in reasons


def test_a_new_store_announces_the_packages_after_its_start_as_its_queue(
    env: h.Env, spark: Any, tmp_path: Path
) -> None:
    settings = h.subscriber_settings(env.js, env.bs, tmp_path / "store", reset="latest")
    before = env.send(good("before"))  # a new topic answers offsets once it has a leader
    start = reset_position(env.journal, settings)
    assert start == before + 1
    sent = [env.send(good(f"queued{i}")) for i in range(3)]
    store = DeltaStore(spark, settings.store_path)
    agent = SubscriberAgent(settings, env.journal, store, env.blobs, start_offset=start)
    agent.open()  # the store opens after the packages went by; nothing imported yet
    announced = agent.announcer.message()
    (state,) = announced.subscriber_state
    # The publisher's queue is everything after the announced offset: the three packages.
    assert state.offset == start - 1 == sent[0] - 1
    agent.stop()
