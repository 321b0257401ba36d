"""End to end: a hundred real subscriber agents on one publisher (tests/e2e/fleet.py).

One publisher daemon and two subscriber daemons of 50 agents each, every agent with its own
Delta store on local disk, on the real Kafka broker and S3 server. 30 requests through the REST
API (adds and deletes, 3 spilled to S3); a third of the way through, 10 agents leave (removed
from their daemons' agents files, SIGHUP), halfway 10 join the running daemons the same way
(5 on copies of running agents' stores, 5 from earliest), and once all hold the last package
2 more (a copy, and one from earliest). Every running agent imports the last package, every
store equals the model of the log, no store's Delta log imports an offset twice, the
publisher's queues follow the leave and the join, and it sends one distributed event per
package. bench/subscriber_hundred.py runs the same at the issue's size (1,000 packages,
20 + 20).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests import services
from tests.e2e.fleet import DISCOVERY_TTL_S, Fleet, Size, run_scenario, start_fleet
from tests.services import KafkaService, S3Service

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.scale,
    pytest.mark.skipif(not services.java_available(), reason="Spark needs Java (17+)"),
]

SIZE = Size(
    agents=100,
    daemons=2,
    packages=30,
    leave=10,
    join=10,
    spill_every=10,
    rate=10.0,
    driver_memory="1g",
    maintenance=False,
)
# Agents that join once the fleet holds the last package (tests/e2e/fleet.py, Churn).
LATE_JOINERS = 2
# Two Spark drivers starting and a hundred stores created on a loaded 2-core machine.
START_TIMEOUT_S = 600.0
CONVERGE_TIMEOUT_S = 600.0


@pytest.fixture(scope="module")
def fleet(
    kafka_service: KafkaService, s3_service: S3Service, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Fleet]:
    fleet = start_fleet(
        kafka_service, s3_service, tmp_path_factory.mktemp("hundred"), SIZE, START_TIMEOUT_S
    )
    try:
        yield fleet
    finally:
        fleet.close()


@pytest.mark.timeout(1500)
def test_a_hundred_subscribers_with_ten_leaving_and_ten_joining(
    fleet: Fleet, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    report = run_scenario(fleet, SIZE, spark, CONVERGE_TIMEOUT_S)
    assert not report["problems"], "\n".join(report["problems"])
    assert report["packages"] == SIZE.packages
    assert report["spilled"] == SIZE.packages // SIZE.spill_every
    assert report["stores_checked"] == SIZE.agents + LATE_JOINERS
    assert report["store_logs_checked"] == SIZE.agents + SIZE.join + LATE_JOINERS
    assert report["joiners_in"] == "running daemons (SIGHUP)"
    assert report["events"] == SIZE.packages
    # The publisher forgets a subscriber DISCOVERY_TTL_S after its last announcement, and
    # refreshes its view twice a second.
    assert report["queues_follow"]["leave_queues_s"] <= DISCOVERY_TTL_S + 5
    joiners = report["joiners"]
    assert len(joiners) == SIZE.join
    assert all(j["start_to_ready_s"] > 0 for j in joiners.values()), joiners
    late = report["joiners_of_the_caught_up_fleet"]
    assert sorted(j["seed"].split()[0] for j in late.values()) == ["clone", "earliest"], late
    assert all(j["start_to_ready_s"] > 0 for j in late.values()), late
    with capsys.disabled():
        print(f"\n[e2e] hundred subscribers: {report}", file=sys.stderr)
