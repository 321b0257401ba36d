"""Several subscriber agents in one daemon (``scd subscriber`` with SCD_SUBSCRIBER_AGENTS_FILE)
on real Kafka, S3 and Spark/Delta: one process, one JVM, three agents (two stores on local
disk, one on s3a://).

* every agent imports the whole stream (adds, updates, deletes, some packages spilled to S3)
  and its store equals the reference model, every offset committed once; /health lists the
  three, /ready needs all three, /metrics labels each;
* the store of one agent made unusable (its folder replaced by a file) stops that agent
  alone: the other two import the packages sent after it, their stores equal the model
  again, /health shows the broken one stuck and why; SIGTERM still stops the daemon cleanly.

The daemon starts once for the module (its JVM start is most of the wall time).
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from blobstore.factory import open_blob_store
from journal.factory import open_journal
from tests import services
from tests.services import KafkaService, S3Service
from tests.subscriber import harness as h
from tests.subscriber.integration.test_crash import Stream, check_store, child_env
from tests.subscriber.integration.test_single_writer import Daemon, wait_until
from tests.subscriber.reference_model import PackageGenerator

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(not services.java_available(), reason="Spark needs Java (17+)"),
]

AGENTS = ("edge-a", "edge-b", "edge-c")
BROKEN = "edge-c"
FIRST_PACKAGES, MORE_PACKAGES = 30, 12
# One JVM start and three store claims on a loaded 2-core machine.
START_S = 180.0
CATCH_UP_S = 90.0
# States an agent that cannot write its store may be in: retrying the import (BLOCKED), its
# lease lost with the store (STANDBY), or a thread down (FAILED).
STUCK = {"BLOCKED", "RETRYING", "STANDBY", "FAILED"}


@dataclass
class Fleet:
    env: h.Env
    stream: Stream
    daemon: Daemon
    stores: dict[str, str]

    def health(self) -> dict[str, Any]:
        return self.daemon.health()

    def agents(self) -> dict[str, dict[str, Any]]:
        return {a["agent"]: a for a in self.health()["agents"]}

    def ready(self) -> tuple[int, dict[str, Any]]:
        url = f"http://127.0.0.1:{self.daemon.port}/ready"
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return answer.status, dict(json.loads(answer.read()))
        except urllib.error.HTTPError as error:
            return error.code, dict(json.loads(error.read()))

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.daemon.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as answer:
            return str(answer.read().decode())

    def wait(self, condition: Callable[[], bool], timeout_s: float, what: str) -> None:
        def answered() -> bool:
            try:
                return condition()
            except (OSError, KeyError, ValueError):
                return False  # the endpoint not up yet

        wait_until(answered, timeout_s, what, [self.daemon])


@pytest.fixture(scope="module")
def fleet(
    kafka_service: KafkaService, s3_service: S3Service, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Fleet]:
    tmp = tmp_path_factory.mktemp("many-agents")
    name = services.unique_name("many-agents")
    js = h.journal_settings(kafka_service, name, tmp)
    bs = h.blob_settings(s3_service, name, tmp)
    with open_journal(js) as journal, open_blob_store(bs) as blobs:
        h.create_topics(journal, js)
        env = h.Env(journal, js, blobs, bs, tmp)

        def put(key: str, data: bytes) -> None:
            blobs.put_bytes(key, data)

        stream = Stream(env, PackageGenerator(20_261_126, put))
        stream.write(FIRST_PACKAGES)
        stores = {
            "edge-a": str(tmp / "stores" / "edge-a"),
            "edge-b": f"s3a://{bs.bucket}/stores/edge-b",
            "edge-c": str(tmp / "stores" / "edge-c"),
        }
        agents_file = tmp / "agents.toml"
        # edge-b overrides one setting: each agent's table is its own.
        agents_file.write_text(
            "".join(
                f'[[agent]]\nname = "{n}"\nstore_path = "{stores[n]}"\n'
                + ("batch_max = 20\n" if n == "edge-b" else "")
                for n in AGENTS
            )
        )
        environment = child_env(env, Path(stores["edge-a"]), broken=False, batch_max=50)
        for own in ("AGENT_NAME", "STORE_PATH"):
            del environment[f"SCD_SUBSCRIBER_{own}"]
        environment.update(
            {
                "SCD_SUBSCRIBER_AGENTS_FILE": str(agents_file),
                "SCD_SUBSCRIBER_SPARK_JARS": ",".join(services.spark_jars(s3a=True)),
                "SCD_SUBSCRIBER_READY_IDLE_S": "1",
                "SCD_SUBSCRIBER_MAINTENANCE_ENABLED": "false",
            }
        )
        logs = tmp / "logs"
        logs.mkdir()
        daemon = Daemon("fleet", environment, logs)
        try:
            yield Fleet(env, stream, daemon, stores)
        finally:
            if daemon.proc.poll() is None:
                daemon.kill()


def offsets(fleet: Fleet) -> dict[str, int | None]:
    return {n: a["processedOffset"] for n, a in fleet.agents().items()}


def test_every_agent_imports_the_stream_into_its_own_store(
    fleet: Fleet, spark: Any, s3_service: S3Service
) -> None:
    last = fleet.stream.last_offset
    fleet.wait(
        lambda: all(o == last for o in offsets(fleet).values()), START_S, "all three imported"
    )
    fleet.wait(lambda: fleet.ready()[0] == 200, 30, "the daemon ready")
    _, answer = fleet.ready()
    assert answer["reason"] == "all 3 agents ready"
    health = fleet.health()
    assert health["holdsPosition"] is True
    assert health["processedOffset"] == last
    agents = fleet.agents()
    assert sorted(agents) == sorted(AGENTS)
    assert len({a["instanceId"] for a in agents.values()}) == 3  # a store each
    assert all(a["role"] == "active (writer epoch 1)" for a in agents.values())
    # One exposition, a series per agent (the gauge follows each agent's announcement).
    lines = [f'scd_processed_offset{{agent="{name}"}} {float(last)}' for name in AGENTS]
    fleet.wait(lambda: all(x in fleet.metrics() for x in lines), 30, "every agent's metrics")
    assert "committed offsets" in fleet.daemon.log()

    services.use_s3(spark, s3_service)
    model, first, last_read = fleet.stream.reference()
    assert last_read == last
    for name, location in fleet.stores.items():
        problems, _ = check_store(spark, location, model, first, last, fleet.env.blobs)
        assert not problems, f"{name}: " + "\n".join(problems)


def test_a_broken_store_stops_its_agent_alone(fleet: Fleet, spark: Any) -> None:
    before = offsets(fleet)
    assert set(before.values()) == {fleet.stream.last_offset}, "the first test did not finish"
    broken = Path(fleet.stores[BROKEN])
    shutil.move(broken, broken.with_name("moved-away"))
    broken.write_text("not a store")  # neither a folder nor a Delta table any more
    fleet.stream.write(MORE_PACKAGES)
    last = fleet.stream.last_offset
    fleet.wait(
        lambda: all(offsets(fleet)[n] == last for n in AGENTS if n != BROKEN),
        CATCH_UP_S,
        "the two healthy agents imported the rest",
    )
    fleet.wait(lambda: fleet.agents()[BROKEN]["state"] in STUCK, 60, f"{BROKEN} stuck")
    stuck = fleet.agents()[BROKEN]
    # Its offset as before, or none once it lost its store's writer role with the store.
    assert stuck["processedOffset"] in (before[BROKEN], None)
    health = fleet.health()
    assert health["processedOffset"] in (before[BROKEN], None)  # the lowest: the broken one's
    assert health["state"] in STUCK
    for name in AGENTS:
        if name != BROKEN:
            assert fleet.agents()[name]["state"] in {"IDLE", "RUNNING"}

    model, first, last_read = fleet.stream.reference()
    assert last_read == last
    for name in AGENTS:
        if name == BROKEN:
            continue
        problems, _ = check_store(spark, fleet.stores[name], model, first, last, fleet.env.blobs)
        assert not problems, f"{name}: " + "\n".join(problems)
    assert fleet.daemon.stop() == 0  # the broken agent does not hold the stop up
