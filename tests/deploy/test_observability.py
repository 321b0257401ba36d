"""deploy/observability speaks of metrics scd really exports: every `scd_` series the alert
rules and the Grafana dashboard query is defined in the code (a renamed metric fails here,
not silently on a dashboard). The rules run in a real Prometheus in
tests/operator/test_prometheus.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
OBSERVABILITY = ROOT / "deploy" / "observability"
# Every module of the packages: a concept's metrics may live beside it (subscriber/hooks/).
METRIC_SOURCES = ["publisher/**/*.py", "subscriber/**/*.py", "journal/**/*.py", "runtime/**/*.py"]
# What prometheus_client appends to a counter's or a histogram's name in the exposition.
SUFFIXES = ("_total", "_created", "_bucket", "_sum", "_count")
SERIES = re.compile(r"\bscd_[a-z0-9_]+")


def defined_metrics() -> set[str]:
    names: set[str] = set()
    for pattern in METRIC_SOURCES:
        for source in ROOT.glob(pattern):
            names.update(re.findall(r'"(scd_[a-z0-9_]+)"', source.read_text()))
    return names


def undefined(expressions: list[str]) -> set[str]:
    known = defined_metrics()
    missing = set()
    for expr in expressions:
        for series in SERIES.findall(expr):
            base = next((series.removesuffix(s) for s in SUFFIXES if series.endswith(s)), series)
            if series not in known and base not in known:
                missing.add(series)
    return missing


def alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load((OBSERVABILITY / "alerts.yml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def dashboard_targets(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for p in dashboard["panels"] for t in p.get("targets", [])]


def test_alert_rules_query_defined_metrics_and_explain_themselves() -> None:
    rules = alert_rules()
    assert undefined([r["expr"] for r in rules]) == set()
    names = {r["alert"] for r in rules}
    # What the issue asks alerts for: lag, blocked queue, permanent import errors, thread
    # restarts, behind the retention, journal errors of the publisher.
    assert {
        "ScdSubscriberLagging",
        "ScdQueueBlocked",
        "ScdPermanentImportErrors",
        "ScdThreadRestarts",
        "ScdSubscriberBehindRetention",
        "ScdPublisherJournalErrors",
    } <= names
    exprs = " ".join(r["expr"] for r in rules)
    assert "scd_permanent_import_errors_total" in exprs
    assert "scd_thread_restarts_total" in exprs
    for rule in rules:
        assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
        assert rule["annotations"]["summary"]
        assert rule["annotations"]["description"]


def test_grafana_dashboard_queries_defined_metrics() -> None:
    dashboard = json.loads((OBSERVABILITY / "grafana-dashboard.json").read_text())
    targets = dashboard_targets(dashboard)
    assert len(targets) >= 20
    assert undefined([t["expr"] for t in targets]) == set()
    # One datasource variable: the dashboard imports into any Grafana with a Prometheus.
    assert dashboard["templating"]["list"][0]["type"] == "datasource"
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    queried = " ".join(t["expr"] for t in targets)
    for metric in ("scd_queue_lag_seconds", "scd_request_distributed_duration_seconds_bucket"):
        assert metric in queried


def test_scrape_config_loads_the_rules_and_names_both_jobs() -> None:
    config = yaml.safe_load((OBSERVABILITY / "prometheus.yml").read_text())
    assert config["rule_files"] == ["alerts.yml"]
    assert [j["job_name"] for j in config["scrape_configs"]] == ["scd-publisher", "scd-subscribers"]
    jobs = set(re.findall(r'job="([^"]+)"', (OBSERVABILITY / "alerts.yml").read_text()))
    assert jobs == {"scd-publisher", "scd-subscribers"}
