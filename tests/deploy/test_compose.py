"""deploy/docker-compose.yml (both image sets) and deploy/images/Dockerfile.

Where the compose plugin exists, `docker compose config` parses, merges and interpolates the
files, and the rules of tests/deploy/compose_rules.py (what compose cannot know: settings
names against scd's models, start order by health, loopback ports, pins, credentials from the
.env) run on its output. Without the plugin the rules run on the file as loaded here. Broken
copies show that each rule can fail.
"""

from __future__ import annotations

import copy
import json
import re
import secrets
import shutil
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from tests.deploy import compose_rules as rules

# What a user's deploy/.env holds: the sample's values plus generated secrets.
USER_VARIABLES = {
    **rules.env_example_variables(),
    "SCD_COMPOSE_API_TOKEN": secrets.token_hex(24),
    "SCD_COMPOSE_S3_ACCESS_KEY": "scdadmin",
    "SCD_COMPOSE_S3_SECRET_KEY": secrets.token_hex(24),
}
# `docker compose config` parses and interpolates the file; a few seconds at most.
COMPOSE_CONFIG_TIMEOUT_S = 60
# The variables come from the test alone, not from a deploy/.env a developer may have.
COMPOSE_CONFIG = ["docker", "compose", "--env-file", "/dev/null", "-f", str(rules.COMPOSE_FILE)]
# The image sets of deploy/compose.sh (SCD_COMPOSE_IMAGES): extra compose files of each.
IMAGE_SETS = {"local": [], "public": ["-f", str(rules.PUBLIC_OVERRIDE)]}
CLEAN_PATH = {"PATH": "/usr/bin:/bin:/usr/local/bin"}


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    return rules.load_compose()


@pytest.fixture(scope="module")
def dockerfile() -> str:
    return rules.DOCKERFILE.read_text()


@pytest.fixture(scope="module")
def image_env(dockerfile: str) -> dict[str, str]:
    return rules.dockerfile_final_env(dockerfile)


def test_compose_file_follows_the_rules(raw: dict[str, Any], image_env: dict[str, str]) -> None:
    assert rules.compose_problems(raw, USER_VARIABLES, image_env) == []


def _compose_plugin() -> bool:
    docker = shutil.which("docker")
    if docker is None:
        return False
    probe = subprocess.run(
        [docker, "compose", "version"],
        capture_output=True,
        timeout=COMPOSE_CONFIG_TIMEOUT_S,
        check=False,
    )
    return probe.returncode == 0


needs_compose = pytest.mark.skipif(
    not _compose_plugin(), reason="the docker compose plugin is not installed"
)


def _compose_config(
    image_set: str, variables: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMPOSE_CONFIG, *IMAGE_SETS[image_set], "config", *args],
        env={**CLEAN_PATH, **variables},
        capture_output=True,
        text=True,
        timeout=COMPOSE_CONFIG_TIMEOUT_S,
        check=False,
    )


@needs_compose
@pytest.mark.parametrize("image_set", sorted(IMAGE_SETS))
def test_what_compose_makes_of_each_image_set_follows_the_rules(
    image_set: str, image_env: dict[str, str]
) -> None:
    result = _compose_config(image_set, USER_VARIABLES, "--format", "json")
    assert result.returncode == 0, result.stderr
    merged = json.loads(result.stdout)
    assert rules.merged_problems(merged, image_env) == []
    services = merged["services"]
    if image_set == "public":
        assert services["kafka"]["image"].startswith("apache/kafka:")
        assert "minio/minio:" in services["s3"]["image"]
        assert "build" not in services["kafka"]
        assert "build" not in services["s3"]
        assert services["publisher"]["build"]["args"]["BASE_IMAGE"] == "debian:bookworm-slim"
        # Every service of the scd image runs the public build, the second publisher too.
        local = rules.interpolate(rules.load_compose(), USER_VARIABLES)["services"]
        scd = {n for n, s in local.items() if s.get("image") == "scd:local"}
        assert {services[n]["image"] for n in scd} == {"scd:public"}
    else:
        built = {name: s["build"]["target"] for name, s in services.items() if "build" in s}
        # The scd image is built once (the publisher's section) and run by six services.
        assert built == {"kafka": "kafka", "s3": "s3", "publisher": "scd"}
        assert services["publisher"]["build"]["args"]["BASE_IMAGE"].startswith("scd-base:")
        never_pulled = {n for n, s in services.items() if s.get("pull_policy") == "never"}
        assert never_pulled == {n for n, s in services.items() if s["image"] == "scd:local"} - {
            "publisher"
        }


@needs_compose
@pytest.mark.parametrize("image_set", sorted(IMAGE_SETS))
def test_compose_stops_on_a_missing_secret_with_its_name(image_set: str) -> None:
    missing = {k: v for k, v in USER_VARIABLES.items() if k != "SCD_COMPOSE_API_TOKEN"}
    result = _compose_config(image_set, missing, "--quiet")
    assert result.returncode != 0
    assert "SCD_COMPOSE_API_TOKEN" in result.stderr


def test_dockerfile_follows_the_rules(dockerfile: str) -> None:
    assert rules.dockerfile_problems(dockerfile) == []


def test_the_topology_is_the_one_of_the_design(raw: dict[str, Any]) -> None:
    services = rules.interpolate(raw, USER_VARIABLES)["services"]
    daemons = rules.scd_daemons(services)
    assert sorted(daemons.values()) == ["publisher"] * 2 + ["subscriber"] * 3
    publishers = sorted(n for n, kind in daemons.items() if kind == "publisher")
    assert publishers == ["publisher", "publisher-2"]
    # The replicas share a network Kafka is not on: the fault tests cut one off the default
    # network (Kafka's) while clients and the other replica still reach it.
    on_front = sorted(n for n, s in services.items() if "front" in (s.get("networks") or []))
    assert on_front == publishers
    assert all("default" in services[n]["networks"] for n in publishers)
    ports = [services[n]["ports"] for n in publishers]
    assert ports == [["127.0.0.1:28080:8080"], ["127.0.0.1:28082:8080"]]
    assert services["kafka"]["image"] == "scd-kafka:local"
    assert services["s3"]["image"] == "scd-s3:local"
    assert services["spark-master"]["image"] == services["subscriber-1"]["image"] == "scd:local"
    assert "KAFKA_PROCESS_ROLES" in rules.environment(services["kafka"])  # KRaft, no ZooKeeper


def test_the_images_build_the_versions_of_the_native_scripts(dockerfile: str) -> None:
    s3_script = (rules.DEPLOY_DIR / "s3.sh").read_text()
    native = re.search(r'^VERSITYGW_VERSION="([^"]+)"', s3_script, re.MULTILINE)
    image = re.search(r"^ARG VERSITYGW_VERSION=(\S+)", dockerfile, re.MULTILINE)
    assert native, "no VERSITYGW_VERSION in deploy/s3.sh"
    assert image, "no ARG VERSITYGW_VERSION in deploy/images/Dockerfile"
    assert image.group(1) == native.group(1)


@pytest.mark.parametrize(
    "variable", ["SCD_COMPOSE_API_TOKEN", "SCD_COMPOSE_S3_ACCESS_KEY", "SCD_COMPOSE_S3_SECRET_KEY"]
)
def test_a_missing_secret_stops_compose_with_its_name(raw: dict[str, Any], variable: str) -> None:
    for value in (None, ""):
        variables = {k: v for k, v in USER_VARIABLES.items() if k != variable}
        if value is not None:
            variables[variable] = value
        with pytest.raises(rules.InterpolationError, match=variable):
            rules.interpolate(raw, variables)


def test_the_sample_env_file_holds_no_secret() -> None:
    sample = rules.env_example_variables()
    for name, value in sample.items():
        if rules.SECRET_NAME.search(name):
            assert value == "", f"{name} has a value in deploy/.env.example"


def test_setting_names_come_from_the_models() -> None:
    assert "SCD_JOURNAL_TOPICS__PACKAGE" in rules.JOURNAL_NAMES
    assert "SCD_JOURNAL_SECURITY__SASL_PASSWORD" in rules.JOURNAL_NAMES
    assert "SCD_BLOB_ENDPOINT_URL" in rules.BLOB_NAMES
    assert "SCD_PUBLISHER_API_TOKEN" in rules.PUBLISHER_NAMES
    assert "SCD_SUBSCRIBER_SPARK_MASTER" in rules.SUBSCRIBER_NAMES
    assert not any(name.startswith("SCD_SUBSCRIBER_JOURNAL") for name in rules.SUBSCRIBER_NAMES)


def test_the_image_jars_are_the_versions_of_the_spark_pom(image_env: dict[str, str]) -> None:
    pom = rules.SPARK_POM.read_text()

    def version(prop: str) -> str:
        found = re.search(rf"<{prop}>([^<]+)</{prop}>", pom)
        assert found, prop
        return found.group(1)

    jars = {path.rsplit("/", 1)[1] for path in image_env["SCD_SUBSCRIBER_SPARK_JARS"].split(",")}
    assert f"delta-spark_2.13-{version('delta.version')}.jar" in jars
    assert f"hadoop-aws-{version('hadoop.version')}.jar" in jars


# ---------------------------------------------------------------- the rules can fail

Mutation = Callable[[dict[str, Any]], None]


def _set_env(service: str, name: str, value: str) -> Mutation:
    def mutate(compose: dict[str, Any]) -> None:
        compose["services"][service]["environment"][name] = value

    return mutate


def _drop_env(service: str, name: str) -> Mutation:
    def mutate(compose: dict[str, Any]) -> None:
        del compose["services"][service]["environment"][name]

    return mutate


def _set(service: str, key: str, value: Any) -> Mutation:
    def mutate(compose: dict[str, Any]) -> None:
        compose["services"][service][key] = value

    return mutate


def _drop(service: str, key: str) -> Mutation:
    def mutate(compose: dict[str, Any]) -> None:
        del compose["services"][service][key]

    return mutate


def _drop_services(*names: str) -> Mutation:
    def mutate(compose: dict[str, Any]) -> None:
        for name in names:
            del compose["services"][name]

    return mutate


BROKEN_COMPOSE: list[tuple[str, Mutation, str]] = [
    (
        "misspelled setting",
        _set_env("subscriber-2", "SCD_SUBSCRIBER_STORE_PTH", "s3a://x/y"),
        "subscriber-2: SCD_SUBSCRIBER_STORE_PTH is not a setting of the subscriber",
    ),
    (
        "another daemon's setting",
        _set_env("publisher", "SCD_SUBSCRIBER_RESET", "earliest"),
        "publisher: SCD_SUBSCRIBER_RESET is not a setting of the publisher",
    ),
    (
        "nested setting that does not exist",
        _set_env("publisher", "SCD_JOURNAL_TOPICS__PACKAGES", "p"),
        "SCD_JOURNAL_TOPICS__PACKAGES is not a setting",
    ),
    ("missing healthcheck", _drop("kafka", "healthcheck"), "kafka: no healthcheck"),
    (
        "disabled healthcheck",
        _set("s3", "healthcheck", {"disable": True}),
        "s3: no healthcheck",
    ),
    (
        "start order without health",
        _set("publisher", "depends_on", {"kafka": {"condition": "service_started"}}),
        "publisher: depends on 'kafka' with condition 'service_started'",
    ),
    (
        "short depends_on",
        _set("publisher", "depends_on", ["kafka"]),
        "publisher: depends_on lists services without condition",
    ),
    (
        "waiting for a one-shot's health instead of its success",
        _set("publisher", "depends_on", {"s3-buckets": {"condition": "service_healthy"}}),
        "publisher: depends on 's3-buckets' with condition 'service_healthy'",
    ),
    (
        "dependency on a missing service",
        _set("publisher", "depends_on", {"zookeeper": {"condition": "service_healthy"}}),
        "publisher: depends on 'zookeeper', which is not a service",
    ),
    (
        "port on every address",
        _set("publisher", "ports", ["28080:8080"]),
        "publisher: port '28080:8080' is published on every address",
    ),
    (
        "port on a public address (long syntax)",
        _set("kafka", "ports", [{"target": 29092, "published": 29092, "host_ip": "0.0.0.0"}]),
        "is published on 0.0.0.0",
    ),
    ("latest image", _set("s3", "image", "minio/minio:latest"), "not pinned"),
    ("untagged image", _set("spark-master", "image", "apache/spark"), "not pinned"),
    (
        "secret written into the file",
        _set_env("publisher", "SCD_PUBLISHER_API_TOKEN", "a-token-anyone-can-read-here"),
        "publisher: SCD_PUBLISHER_API_TOKEN is a credential",
    ),
    (
        "secret with a default",
        _set_env("s3", "ROOT_SECRET_KEY", "${SCD_COMPOSE_S3_SECRET_KEY:-minioadmin}"),
        "s3: ROOT_SECRET_KEY is a credential",
    ),
    (
        "variable that silently becomes empty",
        _set_env("publisher", "SCD_PUBLISHER_AGENT_NAME", "${PUBLISHER_NAME}"),
        "${PUBLISHER_NAME} has neither a default",
    ),
    (
        "publisher without a token",
        _drop_env("publisher", "SCD_PUBLISHER_API_TOKEN"),
        "SCD_PUBLISHER_API_TOKEN must be set",
    ),
    (
        "invalid value",
        _set_env("subscriber-1", "SCD_SUBSCRIBER_RESET", "yesterday"),
        "subscriber-1: invalid settings",
    ),
    (
        "embedded journal instead of Kafka",
        _set_env("subscriber-3", "SCD_JOURNAL_BACKEND", "sqlite"),
        "subscriber-3: journal backend 'sqlite'",
    ),
    (
        "local store",
        _set_env("subscriber-1", "SCD_SUBSCRIBER_STORE_PATH", "/data/store"),
        "subscriber-1: content store '/data/store' is not on s3a://",
    ),
    (
        "s3a store without an S3 endpoint",
        _drop_env("subscriber-1", "SCD_BLOB_ENDPOINT_URL"),
        "subscriber-1: content store on AWS S3, not the cluster's S3 server",
    ),
    (
        "local Spark",
        _set_env("subscriber-2", "SCD_SUBSCRIBER_SPARK_MASTER", "local[2]"),
        "subscriber-2: Spark master 'local[2]' is not the cluster's",
    ),
    (
        "two subscribers sharing a store",
        _set_env("subscriber-2", "SCD_SUBSCRIBER_STORE_PATH", "s3a://scd-content/subscriber-1"),
        "every subscriber needs its own SCD_SUBSCRIBER_STORE_PATH",
    ),
    (
        "worker with another Python",
        _set("spark-worker", "image", "apache/spark:4.0.1-scala2.13-java17-python3-ubuntu"),
        "spark-worker runs 'apache/spark:4.0.1-scala2.13-java17-python3-ubuntu'",
    ),
    ("no Spark master", lambda c: c["services"].pop("spark-master"), "no 'spark-master' service"),
    (
        "two subscribers only",
        lambda c: c["services"].pop("subscriber-3"),
        "expected at least 3 subscribers, found 2",
    ),
    (
        "two replicas with one instance id",
        _set_env("publisher-2", "SCD_PUBLISHER_INSTANCE_ID", "publisher"),
        "every publisher replica needs its own SCD_PUBLISHER_INSTANCE_ID",
    ),
    (
        "replicas of two agents",
        _set_env("publisher-2", "SCD_PUBLISHER_AGENT_NAME", "publish-2"),
        "publisher-2: SCD_PUBLISHER_AGENT_NAME differ from publisher's",
    ),
    (
        "replicas with different tokens",
        _set_env("publisher-2", "SCD_PUBLISHER_API_TOKEN", "${SCD_COMPOSE_S3_SECRET_KEY:?x}"),
        "publisher-2: SCD_PUBLISHER_API_TOKEN differ from publisher's",
    ),
    (
        "advertised URL the other replica cannot reach",
        _set_env("publisher-2", "SCD_PUBLISHER_ADVERTISED_URL", "http://127.0.0.1:8080"),
        "publisher-2: SCD_PUBLISHER_ADVERTISED_URL 'http://127.0.0.1:8080' is not where",
    ),
    (
        "advertised URL on the published port",
        _set_env("publisher", "SCD_PUBLISHER_ADVERTISED_URL", "http://publisher:28080"),
        "publisher: SCD_PUBLISHER_ADVERTISED_URL 'http://publisher:28080' is not where",
    ),
    (
        "replica without an advertised URL",
        _drop_env("publisher-2", "SCD_PUBLISHER_ADVERTISED_URL"),
        "publisher-2: SCD_PUBLISHER_ADVERTISED_URL None is not where",
    ),
    (
        "no publisher",
        _drop_services("publisher", "publisher-2"),
        "expected at least one publisher, found none",
    ),
    (
        "daemon started as a module",
        _set("publisher", "command", ["python", "-m", "publisher"]),
        "publisher: start the daemon as `scd publisher`, not `python -m publisher`",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [pytest.param(m, e, id=i) for i, m, e in BROKEN_COMPOSE],
)
def test_a_broken_compose_file_is_caught(
    raw: dict[str, Any], image_env: dict[str, str], mutate: Mutation, expected: str
) -> None:
    broken = copy.deepcopy(raw)
    mutate(broken)
    problems = rules.compose_problems(broken, USER_VARIABLES, image_env)
    assert any(expected in problem for problem in problems), problems


def test_an_undocumented_variable_is_caught(raw: dict[str, Any], image_env: dict[str, str]) -> None:
    variables = {k: v for k, v in USER_VARIABLES.items() if k != "SCD_COMPOSE_PUBLISHER_PORT"}
    problems = rules.compose_problems(raw, variables, image_env)
    assert "variable SCD_COMPOSE_PUBLISHER_PORT is not documented in deploy/.env.example" in (
        problems
    )


BROKEN_DOCKERFILE: list[tuple[str, str, str, str]] = [
    (
        "latest base",
        "ARG BASE_IMAGE=scd-base:bookworm",
        "ARG BASE_IMAGE=debian:latest",
        "base image 'debian:latest' is not pinned",
    ),
    (
        "untagged base",
        "ARG BASE_IMAGE=scd-base:bookworm",
        "ARG BASE_IMAGE=debian",
        "base image 'debian' is not pinned",
    ),
    ("root user", "USER scd", "USER root", "the scd image runs as root"),
    ("no user", "USER scd\n", "", "the scd image runs as root"),
    (
        "no healthcheck",
        "HEALTHCHECK --interval",
        "# HEALTHCHECK --interval",
        "no HEALTHCHECK in the scd image",
    ),
    (
        "daemon started as a module",
        'CMD ["scd", "publisher"]',
        'CMD ["python", "-m", "publisher"]',
        "CMD does not run the scd command line",
    ),
    ("target missing", "AS s3\n", "AS s3server\n", "no stage 's3'"),
    (
        "misspelled setting",
        "SCD_SUBSCRIBER_SPARK_JARS=",
        "SCD_SUBSCRIBER_SPARKJARS=",
        "ENV SCD_SUBSCRIBER_SPARKJARS is not a setting of scd",
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [pytest.param(o, n, e, id=i) for i, o, n, e in BROKEN_DOCKERFILE],
)
def test_a_broken_dockerfile_is_caught(dockerfile: str, old: str, new: str, expected: str) -> None:
    assert old in dockerfile
    problems = rules.dockerfile_problems(dockerfile.replace(old, new, 1))
    assert any(expected in problem for problem in problems), problems
