"""deploy/observability against a real Prometheus (Debian's `prometheus` and `promtool`): the
shipped configuration and rules pass promtool and their rule unit tests; a Prometheus running
a test copy of them (1 s intervals, short `for:`) scrapes a running publisher and subscriber,
holds the lag and latency series, and fires the lag alert (and the down alert) once the
subscriber is stopped with packages waiting for it."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.operator.conftest import ROOT, require
from tests.operator.embedded import Embedded
from tests.services import free_port
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

SHIPPED = ROOT / "deploy" / "observability"
# The test copy evaluates every second and alerts on a head waiting 2 s instead of 5 min.
TEST_INTERVAL = "1s"
SHIPPED_LAG_THRESHOLD = "> 300"
TEST_LAG_THRESHOLD = "> 2"
START_WAIT_S = 60.0
# A few scrape and evaluation rounds; Spark imports get their own, longer wait.
SERIES_WAIT_S = 30.0
IMPORT_WAIT_S = 240.0


def promtool(*args: str) -> str:
    (tool,) = require("promtool")
    run = subprocess.run(
        [tool, *args], cwd=SHIPPED, capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout + run.stderr


def test_shipped_config_and_rules_pass_promtool() -> None:
    assert "SUCCESS" in promtool("check", "config", "prometheus.yml")
    assert "SUCCESS" in promtool("check", "rules", "alerts.yml")
    # alerts-test.yml: each alert fires on the made-up series it is about, and only there.
    assert "SUCCESS" in promtool("test", "rules", "alerts-test.yml")


def write_config(workdir: Path, publisher: str, subscriber: str) -> Path:
    """The shipped configuration and rules, pointed at the embedded processes, every second."""
    rules = yaml.safe_load((SHIPPED / "alerts.yml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = TEST_INTERVAL
            if rule["alert"] == "ScdSubscriberLagging":
                assert SHIPPED_LAG_THRESHOLD in rule["expr"], rule["expr"]
                rule["expr"] = rule["expr"].replace(SHIPPED_LAG_THRESHOLD, TEST_LAG_THRESHOLD)
    (workdir / "alerts.yml").write_text(yaml.safe_dump(rules))
    config = yaml.safe_load((SHIPPED / "prometheus.yml").read_text())
    config["global"] = {"scrape_interval": TEST_INTERVAL, "evaluation_interval": TEST_INTERVAL}
    targets = {"scd-publisher": [publisher], "scd-subscribers": [subscriber]}
    assert [job["job_name"] for job in config["scrape_configs"]] == list(targets)
    for job in config["scrape_configs"]:
        job["static_configs"] = [{"targets": targets[job["job_name"]]}]
    path = workdir / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def prometheus(
    embedded: Embedded, tmp_path: Path, artifacts: Path
) -> Iterator[tuple[httpx.Client, str]]:
    """A Prometheus scraping the publisher and a subscriber "watched" of ``embedded``."""
    (binary,) = require("prometheus")
    sub = embedded.start_subscriber("watched", editable=True, max_retries=-1)
    config = write_config(tmp_path, _address(embedded.url), _address(sub.server.url))
    port = free_port()
    log_path = artifacts / "prometheus.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
    try:

        def ready() -> bool:
            assert process.poll() is None, log_path.read_text()[-3000:]
            try:
                return client.get("/-/ready").status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(ready, START_WAIT_S, "Prometheus to be ready")
        yield client, "watched"
    finally:
        client.close()
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _address(url: str) -> str:
    return url.removeprefix("http://")


def query(client: httpx.Client, promql: str) -> list[dict[str, Any]]:
    answer = client.get("/api/v1/query", params={"query": promql}).json()
    assert answer["status"] == "success", answer
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def firing(client: httpx.Client, name: str) -> list[dict[str, str]]:
    alerts = client.get("/api/v1/alerts").json()["data"]["alerts"]
    return [
        a["labels"] for a in alerts if a["labels"]["alertname"] == name and a["state"] == "firing"
    ]


def test_prometheus_scrapes_scd_and_alerts_on_a_stopped_subscriber(
    embedded: Embedded, prometheus: tuple[httpx.Client, str]
) -> None:
    client, name = prometheus
    queue = embedded.queue_name(name)
    offset = embedded.distribute({"action": "ADD", "deepPaths": ["/docs"]})
    agent = embedded.subscribers[name].agent
    wait_for(lambda: agent.processed_offset >= offset, IMPORT_WAIT_S, f"{name} to import")

    # Both targets up; the queue lag (publisher) and latency and lag (subscriber) series.
    def up() -> bool:
        return {r["metric"]["job"]: r["value"][1] for r in query(client, "up")} == {
            "scd-publisher": "1",
            "scd-subscribers": "1",
        }

    wait_for(up, SERIES_WAIT_S, "both targets up")
    latency = f'scd_request_distributed_duration_seconds_count{{agent="{name}"}} > 0'
    wait_for(lambda: query(client, latency), SERIES_WAIT_S, "the publish-to-import latency")
    assert query(client, f'scd_queue_lag_seconds{{queue="{queue}"}}')
    assert query(client, f'scd_lag{{agent="{name}"}}')
    # A second import after the first scrapes: the latency histogram grows between two
    # samples, and the dashboard's quantile query has a value.
    second = embedded.distribute({"action": "ADD", "deepPaths": ["/news"]})
    wait_for(lambda: agent.processed_offset >= second, IMPORT_WAIT_S, f"{name} to import again")
    p99 = (
        "histogram_quantile(0.99, sum by (le) "
        f'(rate(scd_request_distributed_duration_seconds_bucket{{agent="{name}"}}[1m])))'
    )
    quantile = wait_for(
        lambda: [r for r in query(client, p99) if r["value"][1] != "NaN"],
        SERIES_WAIT_S,
        "a publish-to-import p99",
    )
    assert 0 < float(quantile[0]["value"][1]) < IMPORT_WAIT_S
    assert not firing(client, "ScdSubscriberLagging")

    # Stopped, with packages waiting: it stays in the publisher's view for the discovery TTL
    # (30 s), its queue's head ages, and the lag alert fires for its queue.
    embedded.stop_subscriber(name)
    for _ in range(2):
        embedded.distribute({"action": "ADD", "deepPaths": ["/news"]})
    lagging = wait_for(
        lambda: firing(client, "ScdSubscriberLagging"), SERIES_WAIT_S, "the lag alert"
    )
    assert [a["queue"] for a in lagging] == [queue]
    assert lagging[0]["severity"] == "warning"
    down = wait_for(lambda: firing(client, "ScdSubscriberDown"), SERIES_WAIT_S, "the down alert")
    assert re.fullmatch(r"127\.0\.0\.1:\d+", down[0]["instance"])
