"""The compose cluster's start-up and footprint: one JSON document on stdout.

    .venv/bin/python -m bench.compose_cluster                  up with the images built
    .venv/bin/python -m bench.compose_cluster --from-scratch   first without any image

* ``up_from_scratch``: with --from-scratch, the cluster's images, the base image, the build
  cache (cache mounts included) and deploy/docker.sh's .deb cache are deleted first, then
  ``deploy/compose.sh up`` is timed: every image built from the package registries, then the
  start until every service is healthy;
* ``build_cached``: ``deploy/compose.sh build`` with nothing changed;
* ``up_with_images``: ``deploy/compose.sh down`` (data volumes removed, so the stores start
  empty), then ``deploy/compose.sh up`` again;
* ``rss_at_rest_mib``: each container's memory (``docker stats --no-stream``) after the cluster
  has been idle for --rest-s seconds;
* ``load_average_1m``: the machine's load at the end: on a shared machine it says how much the
  times above owe to others.

Each of ``MEASUREMENTS`` then runs against the running cluster and adds its own keys: the place
for measurements that need traffic (imports while streaming, publish-to-import latency).
The cluster is left running; ``deploy/compose.sh down -v`` removes it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_DIR = Path(__file__).resolve().parent.parent
COMPOSE_SH = REPO_DIR / "deploy" / "compose.sh"
# The images the local set builds (deploy/docker-compose.yml) and the base they start from.
IMAGES = ("scd:local", "scd-kafka:local", "scd-s3:local")
BASE_REPOSITORY = "scd-base"
# A cold build and start takes minutes; an hour means something is stuck.
UP_TIMEOUT_S = 3600
COMMAND_TIMEOUT_S = 600
# docker stats prints sizes like "512.3MiB" or "1.2GiB".
_SIZE = re.compile(r"^([0-9.]+)\s*([KMGT]?i?B)$")
_UNITS_MIB = {"B": 1 / 2**20, "KiB": 1 / 1024, "MiB": 1.0, "GiB": 1024.0, "TiB": 1024.0**2}


def log(message: str) -> None:
    print(f"[compose_cluster] {message}", file=sys.stderr, flush=True)


def run(args: list[str], timeout: float = COMMAND_TIMEOUT_S) -> str:
    """Runs a command, its stderr passed through; returns its stdout, raises on failure."""
    done = subprocess.run(
        args, stdout=subprocess.PIPE, stderr=sys.stderr, text=True, timeout=timeout, check=True
    )
    return done.stdout


def timed(args: list[str], timeout: float = UP_TIMEOUT_S) -> float:
    started = time.monotonic()
    run(args, timeout)
    return round(time.monotonic() - started, 1)


def compose_sh(*args: str, timeout: float = COMMAND_TIMEOUT_S) -> str:
    return run(["bash", str(COMPOSE_SH), *args], timeout)


def delete_images_and_caches() -> None:
    """Everything a cold build would not have: the images, the base, BuildKit's cache and the
    .deb cache of deploy/docker.sh base."""
    bases = run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}", BASE_REPOSITORY])
    present = [image for image in (*IMAGES, *bases.split()) if image]
    # Untagging is enough for images a container still uses; the rest goes.
    subprocess.run(["docker", "rmi", "-f", *present], capture_output=True, check=False)
    run(["docker", "builder", "prune", "-af"])
    home = Path(os.environ.get("SCD_HOME", Path.home() / ".scd"))
    shutil.rmtree(home / "docker" / "debs", ignore_errors=True)


def mib(size: str) -> float:
    found = _SIZE.match(size.strip())
    if not found:
        raise ValueError(f"unexpected size in docker stats: {size!r}")
    return round(float(found.group(1)) * _UNITS_MIB[found.group(2)], 1)


def rss_per_container() -> dict[str, float]:
    """MiB of memory per container of the cluster (docker stats: usage minus page cache)."""
    ids = compose_sh("ps", "-q").split()
    if not ids:
        return {}
    lines = run(["docker", "stats", "--no-stream", "--format", "{{json .}}", *ids])
    usage: dict[str, float] = {}
    for line in lines.splitlines():
        stats = json.loads(line)
        usage[stats["Name"]] = mib(stats["MemUsage"].split("/")[0])
    return dict(sorted(usage.items()))


# Measurements that need the running cluster: each gets the client settings of
# `deploy/compose.sh env` and returns the keys it adds to the JSON document.
Measurement = Callable[[dict[str, str]], dict[str, Any]]
MEASUREMENTS: list[Measurement] = []


def client_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for line in compose_sh("env").splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        env[name] = value.strip("'\"")
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--from-scratch",
        action="store_true",
        help="delete the images and every build cache first (the next builds are cold too)",
    )
    parser.add_argument("--rest-s", type=float, default=30.0, help="idle time before docker stats")
    args = parser.parse_args()

    result: dict[str, Any] = {}
    log("removing any running cluster and its data (deploy/compose.sh down -v)")
    if (REPO_DIR / "deploy" / ".env").exists():
        compose_sh("down", "-v")
    if args.from_scratch:
        log("deleting the images and the build caches")
        delete_images_and_caches()
        log("deploy/compose.sh up from no image")
        result["up_from_scratch_s"] = timed(["bash", str(COMPOSE_SH), "up"])
        compose_sh("down", "-v")
    log("deploy/compose.sh build with nothing changed")
    result["build_cached_s"] = timed(["bash", str(COMPOSE_SH), "build"])
    log("deploy/compose.sh up with the images built")
    result["up_with_images_s"] = timed(["bash", str(COMPOSE_SH), "up"])
    log(f"idle for {args.rest_s:g} s, then docker stats")
    time.sleep(args.rest_s)
    rss = rss_per_container()
    result["rss_at_rest_mib"] = rss
    result["rss_at_rest_total_mib"] = round(sum(rss.values()), 1)
    env = client_env()
    for measurement in MEASUREMENTS:
        result.update(measurement(env))
    result["load_average_1m"] = os.getloadavg()[0]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
