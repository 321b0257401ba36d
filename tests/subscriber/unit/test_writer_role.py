"""One writer per store, in memory: the writer lease's timing, the hot standby's takeover, the
refusal of a deposed writer's commits, and what an operator sees (role in /health and
/ready, metrics, one log line per change). Clocks are fakes: no test waits for a ttl."""

from __future__ import annotations

import logging
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from journal.wire import messages as m
from runtime.errors import ScdError
from subscriber.agent import SubscriberAgent
from subscriber.errors import LeaseError, WriterDeposed
from subscriber.store.memory import MemoryLease, MemoryStore
from subscriber.writer.lease import LeaseRecord, LocalLeaseObject, S3LeaseObject, WriterLease
from tests.subscriber.harness import Env
from tests.subscriber.packages import node, package

TTL_S, RENEW_S = 12.0, 2.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def lease(shared: MemoryLease, owner: str, clock: Clock) -> WriterLease:
    return WriterLease(shared, owner, TTL_S, RENEW_S, clock)


# ---------------------------------------------------------------------- the lease
def test_local_lease_object_swaps_only_the_version_read(tmp_path: Path) -> None:
    obj = LocalLeaseObject(tmp_path / "_scd_writer")
    assert obj.read() is None
    first = obj.swap(LeaseRecord("a", 1, 0, TTL_S), None)
    assert first is not None
    assert obj.swap(LeaseRecord("b", 1, 0, TTL_S), None) is None  # exists already
    second = obj.swap(LeaseRecord("a", 1, 1, TTL_S), first)
    assert second is not None
    assert obj.swap(LeaseRecord("b", 2, 0, TTL_S), first) is None  # a stale version
    assert obj.read() == (LeaseRecord("a", 1, 1, TTL_S), second)


def test_an_unreachable_lease_is_retriable_one_holding_no_lease_is_not() -> None:
    client = boto3.client(
        "s3", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s"
    )
    obj = S3LeaseObject(client, "bucket", "_scd_writer/lease.json")
    with Stubber(client) as stub:
        stub.add_client_error("get_object", "InternalError", http_status_code=500)
        with pytest.raises(LeaseError) as unreachable:
            obj.read()
    assert isinstance(unreachable.value, ScdError)
    assert unreachable.value.retriable
    with pytest.raises(LeaseError) as garbage:  # the role's lease thread catches both
        LeaseRecord.decode(b"not a lease")
    assert not garbage.value.retriable


def test_standby_takes_over_only_after_the_ttl_without_renewal() -> None:
    shared, clock_a, clock_b = MemoryLease(), Clock(), Clock()
    a, b = lease(shared, "a", clock_a), lease(shared, "b", clock_b)
    assert a.try_acquire()
    assert a.epoch == 1
    assert not b.try_acquire()
    for _ in range(20):  # renewed every 2 s for 40 s: never taken
        clock_a.now += RENEW_S
        clock_b.now += RENEW_S
        assert a.renew()
        assert not b.try_acquire()
    # a stops renewing (dies): b takes over once it saw the same version for the ttl.
    clock_b.now += TTL_S - 0.1
    assert not b.try_acquire()
    clock_b.now += 0.1
    assert b.try_acquire()
    assert b.epoch == 2
    assert not a.renew()  # the zombie finds out at its next renewal
    assert not a.held


def test_holder_counts_its_lease_lapsed_before_a_standby_can_take_it() -> None:
    shared, clock = MemoryLease(), Clock()
    a = lease(shared, "a", clock)
    assert a.try_acquire()
    clock.now += TTL_S - RENEW_S - 0.01
    assert a.held
    clock.now += 0.02
    assert not a.held  # no write after this point, while a standby waits for the full ttl


def test_a_released_lease_is_taken_at_once() -> None:
    shared, clock = MemoryLease(), Clock()
    a, b = lease(shared, "a", clock), lease(shared, "b", clock)
    assert a.try_acquire()
    a.release()
    assert not a.held
    assert b.try_acquire()
    assert b.epoch == 2


def test_only_the_holder_raises_its_epoch() -> None:
    shared, clock_a, clock_b = MemoryLease(), Clock(), Clock()
    a, b = lease(shared, "a", clock_a), lease(shared, "b", clock_b)
    assert a.try_acquire()
    assert a.raise_epoch(5)
    assert (a.epoch, a.held) == (5, True)
    assert not b.try_acquire()
    clock_b.now += TTL_S
    assert b.try_acquire()  # a stopped renewing: b takes over above the raised epoch
    assert b.epoch == 6
    assert not a.raise_epoch(9)  # a deposed holder cannot: the swap of its version fails
    assert not a.held
    assert b.renew()


# ---------------------------------------------------------------------- the memory store
def test_memory_store_refuses_a_deposed_writer() -> None:
    store = MemoryStore()
    other = store.view()
    store.claim(1, "a")
    other.claim(2, "b")
    with pytest.raises(WriterDeposed):
        store.claim(1, "a")
    store.open()
    with pytest.raises(WriterDeposed):
        store.record_offset(5, "start")
    other.open()
    other.record_offset(5, "start")
    assert store.shared.offset == 5


# ---------------------------------------------------------------------- two agents
def two_agents(
    env: Env,
) -> tuple[SubscriberAgent, SubscriberAgent, Clock, Clock, MemoryStore, MemoryLease]:
    store, shared = MemoryStore(), MemoryLease()
    clock_a, clock_b = Clock(), Clock()
    a = env.memory_agent(store, lease(shared, "a", clock_a), batch_max=2)
    b = env.memory_agent(store.view(), lease(shared, "b", clock_b), batch_max=2)
    return a, b, clock_a, clock_b, store, shared


def send(env: Env, count: int, start: int = 0) -> list[int]:
    return [
        env.send(package(f"p{i}", m.ReqType.ADD, [(f"/p{i}", True)], [node(f"/p{i}")]))
        for i in range(start, start + count)
    ]


def test_two_agents_on_one_store_one_imports_the_other_stands_by(local_env: Env) -> None:
    offsets = send(local_env, 5)
    a, b, _, _, store, _ = two_agents(local_env)
    for _ in range(6):
        a.loop.step()
        b.loop.step()
    assert a.processed_offset == offsets[-1]
    assert store.committed_offsets() == offsets  # once each, by a alone
    assert a.health().role == "active (writer epoch 1)"
    assert b.state == "STANDBY"
    assert b.health().instance_id is None
    assert b.health().role.startswith("standby: store memory is written by a")
    ready, reason = b.ready()
    assert not ready
    assert "written by a" in reason
    metrics = b.metrics.render().decode()
    assert 'scd_store_writer_role{agent="sub"} 0.0' in metrics
    assert 'scd_store_writer_role_changes_total{agent="sub",role="standby"} 1.0' in metrics
    assert 'scd_store_writer_role{agent="sub"} 1.0' in a.metrics.render().decode()


def test_standby_takes_over_a_dead_writer_and_imports_the_rest(
    local_env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    offsets = send(local_env, 4)
    a, b, _, clock_b, store, _ = two_agents(local_env)
    a.loop.step()  # imports the first batch, then dies
    assert store.committed_offsets() == offsets[:2]
    offsets += send(local_env, 3, start=4)
    b.role.tick()
    clock_b.now += TTL_S
    with caplog.at_level(logging.INFO, logger="subscriber.writer.role"):
        b.role.tick()
    assert b.role.active
    assert [r.getMessage() for r in caplog.records] == [
        "sub: writer role active on memory: took the writer lease (epoch 2)"
    ]
    for _ in range(4):
        b.loop.step()
    assert b.processed_offset == offsets[-1]
    assert store.committed_offsets() == offsets  # nothing twice, nothing lost
    assert store.shared.claims == [(1, "a"), (2, "b")]


def test_a_zombie_writer_is_refused_by_the_store_and_steps_down(
    local_env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """a pauses (its clock stands still, so its lease still looks valid to it) while b takes
    over; when a wakes up its commit is refused by the store, not by a's own checks."""
    offsets = send(local_env, 2)
    a, b, _, clock_b, store, _ = two_agents(local_env)
    a.loop.step()
    assert store.committed_offsets() == offsets
    offsets += send(local_env, 2, start=2)
    b.role.tick()
    clock_b.now += TTL_S
    b.role.tick()
    b.loop.step()  # claims the store with epoch 2 and imports
    assert store.committed_offsets() == offsets
    late = send(local_env, 1, start=4)
    assert a.role.active  # a does not know yet
    with caplog.at_level(logging.WARNING, logger="subscriber.writer.role"):
        a.loop.step()  # polls offset 4 and tries to commit it
    assert not a.role.active
    assert a.state == "STANDBY"
    assert a.processed_offset == -1  # forgot what it read
    assert "writer role standby on memory: memory store claimed by epoch 2" in caplog.text
    assert store.committed_offsets() == offsets  # a's commit did not land
    b.loop.step()
    assert store.committed_offsets() == offsets + late
    changes = a.metrics.render().decode()
    assert 'scd_store_writer_role_changes_total{agent="sub",role="standby"} 1.0' in changes


def test_a_store_claimed_under_another_lease_is_claimed_above_its_epoch(
    local_env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """A clone carries its source's claims (epoch 3 here), not its lease: the new lease starts
    at epoch 1, which the store refuses. The holder raises its lease above the store's epoch
    and claims with that, at once, instead of standing by."""
    offsets = send(local_env, 2)
    store, shared = MemoryStore(), MemoryLease()
    store.claim(3, "source")
    with caplog.at_level(logging.WARNING, logger="subscriber.writer.role"):
        agent = local_env.memory_agent(store.view(), lease(shared, "clone", Clock()))
        agent.loop.step()
    assert agent.processed_offset == offsets[-1]
    assert agent.health().role == "active (writer epoch 4)"
    assert store.shared.claims == [(3, "source"), (4, "clone")]
    record = shared.read()
    assert record is not None
    assert record[0].epoch == 4
    assert "writer epoch raised from 1 to 4: the store holds claims of epoch 3" in caplog.text


def test_a_writer_whose_lease_cannot_be_renewed_stops_before_it_lapses(local_env: Env) -> None:
    send(local_env, 2)
    a, _, clock_a, _, store, shared = two_agents(local_env)
    shared.fail = True  # the lease's storage is unreachable from a
    clock_a.now += RENEW_S
    a.role.tick()
    assert a.role.active  # still within its lease
    clock_a.now += TTL_S - 2 * RENEW_S
    a.role.tick()
    assert not a.role.active
    a.loop.step()
    assert store.committed_offsets() == []  # nothing written once the lease lapsed
