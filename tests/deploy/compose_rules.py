"""Rules the local cluster's deployment files must follow, as a validator that lists problems.

``compose_problems`` checks deploy/docker-compose.yml (healthchecks, start ordering, ports,
image pins, variables that fail fast, and the scd daemons' environment against the settings
models): what `docker compose config` cannot know. It takes either the file as loaded here or
the merged, interpolated result of `docker compose config` (the real thing, where the plugin
exists). ``dockerfile_problems`` checks deploy/images/Dockerfile's final targets. Both return
human-readable problems (empty when the files are right), so tests can show that a broken copy
is caught.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from blobstore.settings import BlobStoreSettings
from journal.settings import JournalSettings
from publisher.settings import PublisherSettings
from runtime.config import setting_env_names
from runtime.errors import ConfigError
from subscriber.settings import SubscriberSettings
from subscriber.spark import spark_config

REPO_ROOT = Path(__file__).resolve().parents[2]
DEPLOY_DIR = REPO_ROOT / "deploy"
COMPOSE_FILE = DEPLOY_DIR / "docker-compose.yml"
PUBLIC_OVERRIDE = DEPLOY_DIR / "docker-compose.public.yml"
DOCKERFILE = DEPLOY_DIR / "images" / "Dockerfile"
ENV_EXAMPLE = DEPLOY_DIR / ".env.example"
SPARK_POM = DEPLOY_DIR / "spark" / "pom.xml"

# The local cluster's topology: infrastructure services by name, and at least this many
# subscribers.
INFRASTRUCTURE = ("kafka", "s3", "s3-buckets", "spark-master", "spark-worker")
# The Dockerfile's targets the compose file runs; SCD_TARGET runs the scd command line.
FINAL_TARGETS = ("scd", "kafka", "s3")
SCD_TARGET = "scd"
MIN_SUBSCRIBERS = 3
# The settings in which publisher replicas of one agent differ.
PER_REPLICA_SETTINGS = frozenset({"SCD_PUBLISHER_INSTANCE_ID", "SCD_PUBLISHER_ADVERTISED_URL"})
# Environment variables whose value is a credential: it must come from the user's .env and
# stop compose when missing (${VAR:?message}), never be written into the file.
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|ACCESS_KEY|ROOT_USER")
# The only address published ports may bind: nothing here has TLS or authentication on every
# endpoint, so nothing is reachable from the network.
LOOPBACK = "127.0.0.1"
# Compose variable references: $$ (a literal $), ${NAME}, ${NAME<op><word>}, $NAME.
_REFERENCE = re.compile(
    r"\$\$|\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<word>[^}]*))?\}"
    r"|\$(?P<plain>[A-Za-z_][A-Za-z0-9_]*)"
)
_FAIL_FAST_OPS = frozenset({":?", "?"})
_DEFAULT_OPS = frozenset({":-", "-"})


class InterpolationError(ValueError):
    """A required variable is missing (what `docker compose` stops with)."""


# ---------------------------------------------------------------- loading


def load_compose(path: Path = COMPOSE_FILE) -> dict[str, Any]:
    """The compose file as YAML data, anchors and merge keys resolved, not yet interpolated."""
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a YAML mapping")
    return data


def env_example_variables(path: Path = ENV_EXAMPLE) -> dict[str, str]:
    """NAME=value lines of an env file (comments and blank lines skipped)."""
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values


def references(data: Any) -> Iterator[tuple[str, str | None]]:
    """Every variable the data refers to, with its operator (None for a bare reference)."""
    if isinstance(data, str):
        for match in _REFERENCE.finditer(data):
            name = match.group("braced") or match.group("plain")
            if name:
                yield name, match.group("op")
    elif isinstance(data, dict):
        for value in data.values():
            yield from references(value)
    elif isinstance(data, list):
        for value in data:
            yield from references(value)


def interpolate(data: Any, variables: Mapping[str, str]) -> Any:
    """Compose's variable substitution over every string of ``data``."""
    if isinstance(data, str):
        return _REFERENCE.sub(lambda match: _substitute(match, variables), data)
    if isinstance(data, dict):
        return {key: interpolate(value, variables) for key, value in data.items()}
    if isinstance(data, list):
        return [interpolate(value, variables) for value in data]
    return data


def _substitute(match: re.Match[str], variables: Mapping[str, str]) -> str:
    if match.group(0) == "$$":
        return "$"
    name = match.group("braced") or match.group("plain")
    op, word = match.group("op"), match.group("word") or ""
    value = variables.get(name)
    unset_or_empty = not value
    missing = unset_or_empty if op in (":?", ":-") else value is None
    if op in _FAIL_FAST_OPS and missing:
        raise InterpolationError(f"required variable {name} is missing a value: {word}")
    if op in _DEFAULT_OPS and missing:
        return word
    return value or ""


# ---------------------------------------------------------------- settings names


JOURNAL_NAMES = setting_env_names(JournalSettings)
BLOB_NAMES = setting_env_names(BlobStoreSettings)
PUBLISHER_NAMES = setting_env_names(PublisherSettings) | JOURNAL_NAMES | BLOB_NAMES
SUBSCRIBER_NAMES = setting_env_names(SubscriberSettings) | JOURNAL_NAMES | BLOB_NAMES
ALL_SETTING_NAMES = PUBLISHER_NAMES | SUBSCRIBER_NAMES


@contextmanager
def scd_environment(env: Mapping[str, str]) -> Iterator[None]:
    """os.environ with every SCD_* variable replaced by those of ``env``."""
    saved = dict(os.environ)
    try:
        for name in [n for n in os.environ if n.startswith("SCD_")]:
            del os.environ[name]
        os.environ.update(env)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


# ---------------------------------------------------------------- compose rules


def compose_problems(
    raw: Mapping[str, Any], variables: Mapping[str, str], image_env: Mapping[str, str]
) -> list[str]:
    """Everything wrong with a compose file (``raw``: loaded, not interpolated), given the
    user's variables (the .env) and the environment the scd image sets (Dockerfile ENV)."""
    problems = _variable_problems(raw, variables)
    try:
        compose = interpolate(raw, variables)
    except InterpolationError as exc:
        return [*problems, str(exc)]
    return problems + merged_problems(compose, image_env)


def merged_problems(compose: Mapping[str, Any], image_env: Mapping[str, str]) -> list[str]:
    """What is wrong with an interpolated compose model (say `docker compose config`'s):
    every rule but those about variables, which only the file itself shows."""
    problems: list[str] = []
    services: dict[str, Any] = compose.get("services") or {}
    if not services:
        return [*problems, "no services"]
    for name, service in services.items():
        problems += _service_problems(name, service, services)
    problems += _topology_problems(services)
    for name, kind in scd_daemons(services).items():
        problems += _daemon_problems(name, kind, environment(services[name]), image_env)
    return problems


def _variable_problems(raw: Mapping[str, Any], variables: Mapping[str, str]) -> list[str]:
    problems: list[str] = []
    for name, op in sorted(set(references(raw)), key=lambda ref: (ref[0], ref[1] or "")):
        if op is None:
            problems.append(
                f"${{{name}}} has neither a default (:-) nor a fail-fast message (:?); a "
                "missing value would silently become empty"
            )
        if name not in variables:
            problems.append(f"variable {name} is not documented in deploy/.env.example")
    for service_name, service in (raw.get("services") or {}).items():
        for key, value in environment(service).items():
            if SECRET_NAME.search(key) and not re.fullmatch(
                r"\$\{[A-Za-z_][A-Za-z0-9_]*:\?[^}]+\}", str(value)
            ):
                problems.append(
                    f"{service_name}: {key} is a credential; it must be ${{VAR:?message}} "
                    "from the user's .env, not a value or a default"
                )
    return problems


def environment(service: Mapping[str, Any]) -> dict[str, str]:
    """A service's environment as a mapping (compose allows a list of NAME=value too)."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(str(item).partition("=")[::2] for item in env)
    return {str(key): "" if value is None else str(value) for key, value in env.items()}


def one_shot(service: Mapping[str, Any]) -> bool:
    """A service that runs to completion (no healthcheck; others wait for its success)."""
    check = service.get("healthcheck")
    return (
        isinstance(check, dict)
        and bool(check.get("disable"))
        and (service.get("restart") in ("no", "on-failure", None))
    )


def _waited_for_completion(name: str, services: Mapping[str, Any]) -> bool:
    return any(
        isinstance(dep := other.get("depends_on"), dict)
        and (dep.get(name) or {}).get("condition") == "service_completed_successfully"
        for other in services.values()
    )


def _service_problems(
    name: str, service: Mapping[str, Any], services: Mapping[str, Any]
) -> list[str]:
    problems = _dependency_problems(name, service, services)
    if not (one_shot(service) and _waited_for_completion(name, services)):
        problems += _healthcheck_problems(name, service)
    for port in service.get("ports") or []:
        host_ip = _host_ip(port)
        if host_ip != LOOPBACK:
            problems.append(f"{name}: port {port!r} is published on {host_ip or 'every address'}")
    image = service.get("image")
    if not image:
        problems.append(f"{name}: no image (name the image a build produces too)")
    elif not image_pinned(str(image)):
        problems.append(f"{name}: image {image!r} is not pinned to a version")
    return problems


def _healthcheck_problems(name: str, service: Mapping[str, Any]) -> list[str]:
    check = service.get("healthcheck")
    if not isinstance(check, dict) or check.get("disable") or not check.get("test"):
        return [f"{name}: no healthcheck"]
    if check["test"] in (["NONE"], "NONE"):
        return [f"{name}: healthcheck disabled"]
    return []


def _dependency_problems(
    name: str, service: Mapping[str, Any], services: Mapping[str, Any]
) -> list[str]:
    problems: list[str] = []
    depends = service.get("depends_on") or {}
    if isinstance(depends, list):
        problems.append(f"{name}: depends_on lists services without condition: service_healthy")
        depends = {dep: {} for dep in depends}
    for dep, spec in depends.items():
        if dep not in services:
            problems.append(f"{name}: depends on '{dep}', which is not a service")
        condition = (spec or {}).get("condition")
        expected = (
            "service_completed_successfully"
            if one_shot(services.get(dep) or {})
            else "service_healthy"
        )
        if condition != expected:
            problems.append(f"{name}: depends on '{dep}' with condition {condition!r}")
    return problems


def _host_ip(port: Any) -> str | None:
    if isinstance(port, dict):
        return str(port["host_ip"]) if port.get("host_ip") else None
    parts = str(port).split(":")
    # ip:host:container binds ip; host:container and container alone bind every address.
    return parts[0] if len(parts) == 3 else None


def image_pinned(image: str) -> bool:
    """A tag other than latest, or a digest."""
    if "@sha256:" in image:
        return True
    name, _, tag = image.rpartition("/")[2].partition(":")
    return bool(name) and bool(tag) and tag != "latest"


def _command(service: Mapping[str, Any]) -> list[str]:
    command = service.get("command") or []
    return shlex.split(command) if isinstance(command, str) else [str(w) for w in command]


def scd_daemons(services: Mapping[str, Any]) -> dict[str, str]:
    """Services running an scd daemon: name -> "publisher" or "subscriber"."""
    daemons: dict[str, str] = {}
    for name, service in services.items():
        words = _command(service)
        for kind in ("publisher", "subscriber"):
            if words[-2:] in (["scd", kind], ["-m", kind]):
                daemons[name] = kind
    return daemons


def _topology_problems(services: Mapping[str, Any]) -> list[str]:
    problems = [f"no '{name}' service" for name in INFRASTRUCTURE if name not in services]
    # `scd publisher|subscriber` is the daemons' one entry point.
    problems += [
        f"{name}: start the daemon as `scd {kind}`, not `python -m {kind}`"
        for name, kind in scd_daemons(services).items()
        if _command(services[name])[:1] != ["scd"]
    ]
    daemons = scd_daemons(services)
    kinds = list(daemons.values())
    problems += _publisher_replica_problems(
        {n: services[n] for n, k in daemons.items() if k == "publisher"}
    )
    if kinds.count("subscriber") < MIN_SUBSCRIBERS:
        problems.append(
            f"expected at least {MIN_SUBSCRIBERS} subscribers, found {kinds.count('subscriber')}"
        )
    # PySpark executors run the drivers' Python code: the worker needs the subscribers'
    # interpreter (same minor version), scd's modules and jars, i.e. their image.
    images = {services[n].get("image") for n, k in daemons.items() if k == "subscriber"}
    worker_image = (services.get("spark-worker") or {}).get("image")
    if len(images) != 1 or worker_image not in images:
        expected = sorted(map(str, images))
        problems.append(
            f"spark-worker runs {worker_image!r}, not the subscribers' image {expected}"
        )
    subscriber_env = [environment(services[n]) for n, k in daemons.items() if k == "subscriber"]
    for setting in ("SCD_SUBSCRIBER_AGENT_NAME", "SCD_SUBSCRIBER_STORE_PATH"):
        values = [env.get(setting) for env in subscriber_env]
        if len(set(values)) != len(values) or None in values:
            problems.append(f"every subscriber needs its own {setting}: {values}")
    return problems


def _publisher_replica_problems(publishers: Mapping[str, Any]) -> list[str]:
    """The publisher services are replicas of one agent: the same settings but their instance
    id and advertised URL (one token, so that a forwarded request passes the leader's check;
    one agent and topics, so that they elect one leader); each its own instance id; with more
    than one, each advertises its service name on its API's container port, where the other
    replicas forward writing requests."""
    if not publishers:
        return ["expected at least one publisher, found none"]
    problems: list[str] = []
    envs = {name: environment(service) for name, service in publishers.items()}
    instances = [env.get("SCD_PUBLISHER_INSTANCE_ID") for env in envs.values()]
    if len(publishers) > 1 and (None in instances or len(set(instances)) != len(instances)):
        problems.append(
            f"every publisher replica needs its own SCD_PUBLISHER_INSTANCE_ID: {instances}"
        )
    first, *others = envs
    shared = {k: v for k, v in envs[first].items() if k not in PER_REPLICA_SETTINGS}
    for name in others:
        own = {k: v for k, v in envs[name].items() if k not in PER_REPLICA_SETTINGS}
        differ = sorted(k for k in shared.keys() | own.keys() if shared.get(k) != own.get(k))
        if differ:
            problems.append(
                f"{name}: {', '.join(differ)} differ from {first}'s: replicas of one agent "
                "share every setting but their instance id and advertised URL"
            )
    if len(publishers) == 1:
        return problems
    for name, service in publishers.items():
        url = envs[name].get("SCD_PUBLISHER_ADVERTISED_URL")
        port = envs[name].get(
            "SCD_PUBLISHER_PORT", str(PublisherSettings.model_fields["port"].default)
        )
        expected = {f"http://{host}:{port}" for host in (name, service.get("hostname")) if host}
        if url is None or url.rstrip("/") not in expected:
            problems.append(
                f"{name}: SCD_PUBLISHER_ADVERTISED_URL {url!r} is not where the other replicas "
                f"reach it ({' or '.join(sorted(expected))})"
            )
    return problems


def _daemon_problems(
    name: str, kind: str, service_env: Mapping[str, str], image_env: Mapping[str, str]
) -> list[str]:
    problems: list[str] = []
    allowed = PUBLISHER_NAMES if kind == "publisher" else SUBSCRIBER_NAMES
    for key in sorted(service_env):
        if key.startswith("SCD_") and key.upper() not in allowed:
            problems.append(f"{name}: {key} is not a setting of the {kind}")
    with scd_environment({**image_env, **service_env}):
        try:
            journal = JournalSettings()
            blobs = BlobStoreSettings()
            if kind == "publisher":
                PublisherSettings()
            else:
                problems += _subscriber_problems(name, SubscriberSettings())
        except (ValidationError, ValueError, ConfigError) as exc:
            return [*problems, f"{name}: invalid settings: {exc}"]
    if journal.backend != "kafka":
        problems.append(f"{name}: journal backend {journal.backend!r}, not the cluster's Kafka")
    if blobs.backend != "s3":
        problems.append(f"{name}: blob store backend {blobs.backend!r}, not the cluster's S3")
    return problems


def _subscriber_problems(name: str, settings: SubscriberSettings) -> list[str]:
    spark_config(settings)  # raises when an s3a:// store has no S3 endpoint to use
    problems: list[str] = []
    if not settings.store_path.startswith("s3a://"):
        problems.append(f"{name}: content store {settings.store_path!r} is not on s3a://")
    elif settings.blobstore is None or settings.blobstore.endpoint_url is None:
        # Without an endpoint S3A goes to AWS (an S3 store of the cloud), not the cluster's.
        problems.append(f"{name}: content store on AWS S3, not the cluster's S3 server")
    if not settings.spark_master.startswith("spark://"):
        problems.append(f"{name}: Spark master {settings.spark_master!r} is not the cluster's")
    if not settings.spark_jars:
        problems.append(f"{name}: no Spark jars: Spark would fetch them from Maven Central")
    return problems


# ---------------------------------------------------------------- Dockerfile rules


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    instructions: list[tuple[str, str]] = []
    current = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        current += stripped
        keyword, _, args = current.partition(" ")
        instructions.append((keyword.upper(), args.strip()))
        current = ""
    return instructions


def _expand(value: str, args: Mapping[str, str]) -> str:
    return re.sub(
        r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)",
        lambda m: args.get(m.group(1) or m.group(2), m.group(0)),
        value,
    )


def _assignments(args: str, build_args: Mapping[str, str]) -> dict[str, str]:
    words = shlex.split(args)
    if len(words) == 2 and "=" not in words[0]:  # the legacy `ENV NAME value` form
        return {words[0]: _expand(words[1], build_args)}
    pairs = (word.partition("=") for word in words)
    return {name: _expand(value, build_args) for name, _, value in pairs}


def _chain(stages: list[_Stage], target: str) -> list[_Stage]:
    """The stages a target builds on, base first, ending with the target's own."""
    by_alias = {stage.alias: stage for stage in stages if stage.alias}
    chain: list[_Stage] = []
    stage = by_alias.get(target)
    while stage is not None and stage not in chain:
        chain.insert(0, stage)
        stage = by_alias.get(stage.base)
    return chain


def dockerfile_final_env(text: str, target: str = SCD_TARGET) -> dict[str, str]:
    """The ENV of a target's image (inherited from the stages it builds on), build arguments
    expanded."""
    env: dict[str, str] = {}
    for stage in _chain(_stages(text), target):
        for keyword, args in stage.instructions:
            if keyword == "ENV":
                env.update(_assignments(args, {**stage.args, **env}))
    return env


class _Stage:
    def __init__(self, base: str, alias: str | None, args: dict[str, str]) -> None:
        self.base, self.alias, self.args = base, alias, args
        self.instructions: list[tuple[str, str]] = []


def _stages(text: str) -> list[_Stage]:
    global_args: dict[str, str] = {}
    stages: list[_Stage] = []
    for keyword, args in dockerfile_instructions(text):
        if keyword == "FROM":
            words = args.split()
            words = [w for w in words if not w.startswith("--platform")]
            alias = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            stages.append(_Stage(_expand(words[0], global_args), alias, {}))
        elif keyword == "ARG" and not stages:
            global_args.update(_assignments(args, global_args))
        elif keyword == "ARG":
            name, _, default = args.partition("=")
            value = _expand(default, global_args) if default else global_args.get(name, "")
            stages[-1].args[name] = value
        elif stages:
            stages[-1].instructions.append((keyword, args))
    return stages


def _target_problems(stages: list[_Stage], target: str) -> list[str]:
    chain = _chain(stages, target)
    if not chain:
        return [f"no stage '{target}'"]
    problems: list[str] = []
    final = [instruction for stage in chain for instruction in stage.instructions]
    users = [args for keyword, args in final if keyword == "USER"]
    if not users or users[-1].split(":")[0] in ("root", "0"):
        problems.append(f"the {target} image runs as root (no USER in its stages)")
    checks = [args for keyword, args in final if keyword == "HEALTHCHECK"]
    if not checks or checks[-1].upper().startswith("NONE"):
        problems.append(f"no HEALTHCHECK in the {target} image")
    commands = [args for keyword, args in final if keyword == "CMD"]
    if target == SCD_TARGET and (not commands or not commands[-1].startswith('["scd",')):
        problems.append("the scd image's CMD does not run the scd command line")
    return problems


def dockerfile_problems(text: str) -> list[str]:
    problems: list[str] = []
    stages = _stages(text)
    if not stages:
        return ["no FROM"]
    aliases: set[str] = set()
    for stage in stages:
        if stage.base not in aliases and not image_pinned(stage.base):
            problems.append(f"base image {stage.base!r} is not pinned to a version")
        if stage.alias:
            aliases.add(stage.alias)
    for target in FINAL_TARGETS:
        problems += _target_problems(stages, target)
    for key in sorted(dockerfile_final_env(text)):
        if key.startswith("SCD_") and key.upper() not in ALL_SETTING_NAMES:
            problems.append(f"ENV {key} is not a setting of scd")
    return problems
