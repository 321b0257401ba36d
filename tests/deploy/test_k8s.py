"""The Kubernetes manifests of deploy/k8s, checked offline: the Go validator
(deploy/k8s/validate, built once into SCD_HOME by deploy/k8s.sh) decodes each manifest
strictly into k8s.io/api's typed structs and checks selectors, probes, ports, resources and
references; broken copies show that it catches what it claims to. Here, what only scd knows:
every SCD_* variable is a setting, the agents files hold valid agents whose stores have a
writer lease every host sees, one agents file per StatefulSet pod."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from blobstore.settings import BlobStoreSettings
from subscriber.fleet.agents_file import read_agents_file
from subscriber.writer.lease import lease_place
from subscriber.writer.location import S3Store
from tests.deploy.compose_rules import ALL_SETTING_NAMES, DEPLOY_DIR

K8S_DIR = DEPLOY_DIR / "k8s"
# The first build compiles k8s.io/api (about a minute on 2 cores); later runs reuse it.
VALIDATE_TIMEOUT_S = 600
needs_go = pytest.mark.skipif(
    shutil.which("go") is None,
    reason="the manifest validator is a Go program and no go command is installed",
)


def validate(directory: Path) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        ["bash", str(DEPLOY_DIR / "k8s.sh"), "validate", str(directory)],
        capture_output=True,
        text=True,
        timeout=VALIDATE_TIMEOUT_S,
        check=False,
    )
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])


def manifests() -> list[dict[str, Any]]:
    names = yaml.safe_load((K8S_DIR / "kustomization.yaml").read_text())["resources"]
    return [
        document
        for name in names
        for document in yaml.safe_load_all((K8S_DIR / name).read_text())
        if document
    ]


def of_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in manifests() if o["kind"] == kind}


@needs_go
def test_the_manifests_decode_strictly_and_pass_the_checks() -> None:
    code, summary = validate(K8S_DIR)
    assert (code, summary["problems"]) == (0, [])
    assert summary["objects"] == {
        "Namespace": 1,
        "ConfigMap": 2,
        "Deployment": 1,
        "StatefulSet": 1,
        "Service": 2,
        "PodDisruptionBudget": 2,
    }


BREAKAGES = [
    # a typo the API server would drop silently with kubectl's client-side apply
    ("publisher.yaml", "  replicas: 2\n", "  replica: 2\n", 'unknown field "spec.replica"'),
    (
        "subscriber.yaml",
        "              port: http\n",
        "              port: htp\n",
        "is no container port's name",
    ),
    ("publisher.yaml", "      targetPort: http\n", "      targetPort: web\n", "target port web"),
    ("subscriber.yaml", "  maxUnavailable: 1\n", "  minAvailable: 2\n", "blocks every drain"),
    ("subscriber.yaml", "  serviceName: subscriber\n", "  serviceName: subscribers\n", "headless"),
    (
        "subscriber.yaml",
        "            name: scd-agents\n",
        "            name: scd-agent\n",
        "ConfigMap scd-agent",
    ),
    (
        "publisher.yaml",
        "              memory: 512Mi\n",
        "              memory: 128Mi\n",
        "below its request",
    ),
    ("kustomization.yaml", "  - subscriber.yaml\n", "", "subscriber.yaml is not in"),
    ("subscriber.yaml", "value: /etc/scd/agents/$(POD_NAME)", "value: /etc/$(POD)", "$(POD)"),
]


@needs_go
def test_broken_copies_are_refused(tmp_path: Path) -> None:
    """One validator run per breakage: each must fail with the problem it introduced."""
    for index, (name, old, new, problem) in enumerate(BREAKAGES):
        copy = tmp_path / str(index)
        shutil.copytree(K8S_DIR, copy, ignore=shutil.ignore_patterns("validate"))
        text = (copy / name).read_text()
        assert old in text, (name, old)
        (copy / name).write_text(text.replace(old, new, 1))
        code, summary = validate(copy)
        assert code == 1, (name, new)
        assert any(problem in p for p in summary["problems"]), (problem, summary["problems"])


def env_names(workload: dict[str, Any]) -> set[str]:
    (container,) = workload["spec"]["template"]["spec"]["containers"]
    return {variable["name"] for variable in container.get("env", [])}


def test_every_scd_variable_is_a_setting() -> None:
    names = set(of_kind("ConfigMap")["scd-env"]["data"])
    for kind in ("Deployment", "StatefulSet"):
        for workload in of_kind(kind).values():
            names |= env_names(workload)
    unknown = sorted(n for n in names if n.startswith("SCD_") and n not in ALL_SETTING_NAMES)
    assert not unknown


def test_spark_runs_as_a_local_driver_in_each_subscriber_pod() -> None:
    """No Spark master to lose (docs/deploy.md); the commits match the cores requested."""
    (container,) = of_kind("StatefulSet")["subscriber"]["spec"]["template"]["spec"]["containers"]
    env = {v["name"]: v.get("value") for v in container["env"]}
    assert env["SCD_SUBSCRIBER_SPARK_MASTER"] == "local[2]"
    assert env["SCD_SUBSCRIBER_CONCURRENT_COMMITS"] == container["resources"]["requests"]["cpu"]


def test_one_agents_file_per_subscriber_pod_with_stores_on_s3(tmp_path: Path) -> None:
    files = of_kind("ConfigMap")["scd-agents"]["data"]
    replicas = of_kind("StatefulSet")["subscriber"]["spec"]["replicas"]
    assert sorted(files) == [f"subscriber-{i}.toml" for i in range(replicas)]
    blobs = BlobStoreSettings(backend="s3")  # as scd-env says: no endpoint, AWS
    stores: list[str] = []
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        for agent in read_agents_file(tmp_path / name):
            stores.append(agent["store_path"])
            assert isinstance(lease_place(agent["store_path"], blobs), S3Store)
    assert len(set(stores)) == len(stores)  # no store written by two daemons
