"""One writer per store on real Spark/Delta, on a local path and on S3 (s3a://):

* two subscriber daemons (``scd subscriber``) started at once on one store with packages
  waiting: one imports, the other is a standby (log line, /health); SIGKILL of the active one
  in the middle of the import: the standby takes over within 30 s and imports the rest;
* a zombie: an agent whose lease still looks valid to it (its clock stood still, as in a
  SIGSTOP) after another agent took over commits to the store: Delta drops the commit and the
  zombie steps down;
* a clone: a store copied without its lease (seeding a new subscriber) is claimed by its new
  writer at once, above the epoch its source's claims left in the table.

Each checks the Delta history (every offset committed once) and the content (the reference
model of the packages, applied once each, in order).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from journal.wire import messages as m
from subscriber.agent import SubscriberAgent
from subscriber.store.delta import DeltaStore
from subscriber.writer.lease import LEASE_DIR, WriterLease, lease_object
from tests import services
from tests.services import S3Service, free_port
from tests.subscriber import harness as h
from tests.subscriber.harness import Env
from tests.subscriber.integration.test_crash import COMMITTED, Stream, check_store, child_env
from tests.subscriber.packages import node, package
from tests.subscriber.reference_model import PackageGenerator

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(not services.java_available(), reason="Spark needs Java (17+)"),
]

REPO_ROOT = Path(__file__).resolve().parents[3]
PACKAGES = 50
BATCH_MAX = 5
# Lease timing of the daemons under test: a takeover at most 6 + 2 * 1 s after a death.
TTL_S, RENEW_S = 6.0, 1.0
TAKEOVER_LIMIT_S = 30.0
# Two Spark JVMs starting at once on a loaded 2-core machine.
START_S = 240.0
ACTIVE = re.compile(r"writer role active on ")
STANDBY = re.compile(r"writer role standby on ")


def store_location(kind: str, env: Env) -> str:
    return str(env.tmp / "store") if kind == "local" else f"s3a://{env.bs.bucket}/store"


class Daemon:
    """``scd subscriber`` in its own process group (its Spark JVM with it)."""

    def __init__(self, name: str, environment: dict[str, str], logs: Path) -> None:
        self.name = name
        self.port = free_port()
        self.log_path = logs / f"{name}.log"
        with self.log_path.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "scd", "subscriber"],
                env={**environment, "SCD_SUBSCRIBER_HTTP_PORT": str(self.port)},
                cwd=REPO_ROOT,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def committed(self) -> list[tuple[int, int]]:
        return [(int(a), int(b)) for a, b in COMMITTED.findall(self.log())]

    def health(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as r:
            return dict(json.loads(r.read()))

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(120)


def wait_until(condition: Any, timeout_s: float, what: str, daemons: list[Daemon]) -> float:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {d.name}\n{d.log()[-3000:]}" for d in daemons)
            raise AssertionError(f"timed out waiting for {what}\n{tails}")
        time.sleep(0.1)
    return time.monotonic()


@pytest.mark.timeout(900)
@pytest.mark.parametrize("kind", ["local", "s3a"])
def test_two_daemons_one_imports_and_the_standby_takes_over_after_a_sigkill(
    env: Env, spark: Any, s3_service: S3Service, kind: str
) -> None:
    def put(key: str, data: bytes) -> None:
        env.blobs.put_bytes(key, data)

    stream = Stream(env, PackageGenerator(20_251_124, put))
    stream.write(PACKAGES)
    location = store_location(kind, env)
    environment = child_env(env, Path(location), broken=False, batch_max=BATCH_MAX)
    environment.update(
        {
            "SCD_SUBSCRIBER_STORE_PATH": location,
            "SCD_SUBSCRIBER_SPARK_JARS": ",".join(services.spark_jars(s3a=kind == "s3a")),
            "SCD_SUBSCRIBER_WRITER_LEASE_TTL_S": str(TTL_S),
            "SCD_SUBSCRIBER_WRITER_LEASE_RENEW_S": str(RENEW_S),
        }
    )
    logs = env.tmp / "logs"
    logs.mkdir()
    daemons = [Daemon(name, environment, logs) for name in ("one", "two")]
    try:
        # One takes the lease and imports; the other stands by without writing.
        wait_until(
            lambda: any(len(d.committed()) >= 2 for d in daemons), START_S, "imports", daemons
        )
        active = next(d for d in daemons if d.committed())
        standby = next(d for d in daemons if d is not active)
        wait_until(lambda: STANDBY.search(standby.log()), START_S, "a standby", daemons)
        assert ACTIVE.search(active.log())
        assert not standby.committed()
        assert not ACTIVE.search(standby.log())
        assert standby.health()["state"] == "STANDBY"
        assert standby.health()["role"].startswith(f"standby: store {location} is written by")
        assert active.health()["role"] == "active (writer epoch 1)"  # the first one

        active.kill()  # in the middle of the import
        killed = time.monotonic()
        imported = active.committed()[-1][1]
        assert imported < stream.last_offset, "the import was over before the kill"
        took_over = wait_until(
            lambda: ACTIVE.search(standby.log()), TAKEOVER_LIMIT_S + 30, "a takeover", daemons
        )
        assert took_over - killed < TAKEOVER_LIMIT_S
        wait_until(
            lambda: any(b == stream.last_offset for _, b in standby.committed()),
            START_S,
            "the rest imported",
            daemons,
        )
        assert standby.committed()[0][0] == imported + 1  # resumed where the store said
        assert standby.health()["role"] == "active (writer epoch 2)"
        assert standby.stop() == 0
    finally:
        for d in daemons:
            if d.proc.poll() is None:
                d.kill()
    if kind == "s3a":
        services.use_s3(spark, s3_service)
    model, first, last = stream.reference()
    problems, _ = check_store(spark, location, model, first, last, env.blobs)
    assert not problems, "\n".join(problems)


class FrozenClock:
    """A process paused (SIGSTOP) sees no time pass: its lease still looks valid to it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", ["local", "s3a"])
def test_a_zombie_writer_is_refused_by_delta_and_steps_down(
    env: Env, spark: Any, s3_service: S3Service, kind: str
) -> None:
    if kind == "s3a":
        services.use_s3(spark, s3_service)
    location = store_location(kind, env)
    # No maintenance: each step below is then one import, or one poll finding nothing.
    settings = h.subscriber_settings(
        env.js, env.bs, env.tmp, store_path=location, batch_max=10, maintenance_enabled=False
    )
    lease_store = lease_object(location, env.bs)
    zombie_clock, clock = FrozenClock(), FrozenClock()

    def agent(name: str, time_of: FrozenClock) -> SubscriberAgent:
        lease = WriterLease(lease_store, name, TTL_S, RENEW_S, time_of)
        made = SubscriberAgent(
            settings, env.journal, DeltaStore(spark, location), env.blobs, lease=lease
        )
        made.open()
        return made

    def send(i: int) -> int:
        return env.send(package(f"p{i}", m.ReqType.ADD, [(f"/p{i}", True)], [node(f"/p{i}")]))

    def step_until(who: SubscriberAgent, done: Any) -> None:
        for _ in range(10):
            if done():
                return
            who.loop.step()
        raise AssertionError(f"not done after 10 steps: state {who.state}")

    offsets = [send(i) for i in range(3)]
    zombie = agent("zombie", zombie_clock)
    step_until(zombie, lambda: zombie.processed_offset == offsets[-1])

    successor = agent("successor", clock)
    assert successor.state == "STANDBY"
    clock.now += TTL_S  # the zombie renewed nothing meanwhile: its lease expired
    successor.role.tick()
    assert successor.role.active
    offsets.append(send(3))
    # Claims the store with epoch 2, opens it, imports offset 3.
    step_until(successor, lambda: successor.processed_offset == offsets[-1])

    late = send(4)
    assert zombie.role.active  # by its own clock
    # Polls offset 4 and commits it: Delta drops the commit, the zombie steps down.
    step_until(zombie, lambda: not zombie.role.active)
    assert zombie.state == "STANDBY"
    step_until(successor, lambda: successor.processed_offset == late)

    store = DeltaStore(spark, location)
    assert h.committed_offsets(store) == [*offsets, late]  # the zombie's commit is not there
    assert store.open().offset == late
    assert sorted(n.path for n in store.nodes()) == [f"/p{i}" for i in range(5)]
    history = store.history()
    writers = [c["metadata"] for c in history if c["metadata"] and "writer" in c["metadata"]]
    assert writers == [{"writer": "zombie", "epoch": 1}, {"writer": "successor", "epoch": 2}]


@pytest.mark.timeout(600)
def test_a_cloned_store_is_claimed_at_once_above_its_sources_epoch(env: Env, spark: Any) -> None:
    source, clone = env.tmp / "source", env.tmp / "clone"

    def agent(location: Path, name: str) -> SubscriberAgent:
        # A clock that stands still: the lease stays valid without a renewal thread.
        lease = WriterLease(
            lease_object(str(location), env.bs), name, TTL_S, RENEW_S, FrozenClock()
        )
        settings = h.subscriber_settings(
            env.js, env.bs, env.tmp, store_path=str(location), maintenance_enabled=False
        )
        made = SubscriberAgent(
            settings,
            env.journal,
            DeltaStore(spark, str(location)),
            env.blobs,
            lease=lease,
        )
        made.open()
        return made

    def send(i: int) -> int:
        return env.send(package(f"p{i}", m.ReqType.ADD, [(f"/p{i}", True)], [node(f"/p{i}")]))

    offsets = [send(i) for i in range(3)]
    first = agent(source, "source")
    h.drive(first, lambda: first.processed_offset == offsets[-1])
    first.stop()
    # The table and its log, not the lease (docs/content-store.md, seeding by cloning).
    shutil.copytree(source, clone, ignore=shutil.ignore_patterns(LEASE_DIR))
    offsets.append(send(3))

    second = agent(clone, "clone")
    h.drive(second, lambda: second.processed_offset == offsets[-1])
    assert second.health().role == "active (writer epoch 2)"  # its lease's 1 was refused
    store = DeltaStore(spark, str(clone))
    assert h.committed_offsets(store) == offsets  # the source's three, the clone's one
    assert sorted(n.path for n in store.nodes()) == [f"/p{i}" for i in range(4)]
    history = store.history()
    writers = [c["metadata"] for c in history if c["metadata"] and "writer" in c["metadata"]]
    assert writers == [{"writer": "source", "epoch": 1}, {"writer": "clone", "epoch": 2}]
    second.stop()
