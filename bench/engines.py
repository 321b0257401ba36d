"""One bench command under two Spark/Delta versions (or two settings), side by side: the
project's virtualenv (``.venv``: the pinned pyspark and delta-spark) and another
(``--other-venv``, such as one with a newer pair), alternating the order round by round in
one run, each run its own process.

Each run's JSON (stdout of the bench) is reduced to its key numbers (``--key`` patterns over
the dotted paths of its numeric fields: imports/s, publish->imported p50/p99, commit, fold and
open times); per version the median of each over the rounds, and the other version's median
over the pinned one's. Every version's Spark gets the Delta (and Kafka source) jars of its own
pyspark and delta-spark: bench/local.py ``spark_jars()`` fetches another pair's from Maven.

``--other-env NAME=VALUE`` sets a variable for the other side only: with the default
``--other-venv`` (the project's ``.venv`` too) that compares one setting side by side, such as
``SCD_SUBSCRIBER_SPARK_CODEGEN=true`` against the default.

``--copy-store SRC`` gives every run a fresh copy of a store (``{store}`` in the command), for
benches that change the store they measure (``subscriber_bigstore.py measure``).
``--dv`` adds a third side, the other version with deletion vectors on every table it creates
(``spark.databricks.delta.properties.defaults.enableDeletionVectors``); ``--dv-store SRC``: the
store that side copies (one generated with deletion vectors on), else ``--copy-store``'s.

    .venv/bin/python -m bench.engines --other-venv /tmp/engines/venv-new --rounds 2 -- \\
        -m bench.subscriber_import --packages 1000 --latency-seconds 20
    .venv/bin/python -m bench.engines --other-venv /tmp/engines/venv-new --rounds 2 \\
        --copy-store /tmp/big -- -m bench.subscriber_bigstore measure --store {store} --pages 20000

JSON on stdout, progress (and the benches' own) on stderr.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_DIR = Path(__file__).resolve().parent.parent
PINNED_VENV = REPO_DIR / ".venv"
# The numbers compared (fnmatch patterns over dotted paths): subscriber_import.py's throughput
# and latency, subscriber_bigstore.py measure's session, open, commit, fold and ls times.
DEFAULT_KEYS = (
    "throughput.scd.packages_per_s_median",
    "throughput.baseline_*.packages_per_s_median",
    "latency.*.scd.p50_s",
    "latency.*.scd.p99_s",
    "latency.*.baseline_*.p50_s",
    "latency.small_commit.append_s_median",
    "session_s",
    "open_s",
    "commits.*.p50_s",
    "fold.seconds",
    "ls.category.command_s",
    "after_open.jvm.*",
)
DV_CONF = "spark.databricks.delta.properties.defaults.enableDeletionVectors=true"
VERSIONS_SCRIPT = (
    "import importlib.metadata as m, json, sys; "
    "print(json.dumps({'python': sys.executable, 'pyspark': m.version('pyspark'), "
    "'delta_spark': m.version('delta-spark')}))"
)


def log(message: str) -> None:
    print(f"[engines] {message}", file=sys.stderr, flush=True)


def flatten(document: Any, prefix: str = "") -> dict[str, float]:
    """The numeric leaves of a JSON document by dotted path (list items by index)."""
    if isinstance(document, bool):
        return {}
    if isinstance(document, int | float):
        return {prefix: float(document)}
    items: list[tuple[str, Any]] = []
    if isinstance(document, dict):
        items = [(str(k), v) for k, v in document.items()]
    elif isinstance(document, list):
        items = [(str(i), v) for i, v in enumerate(document)]
    found: dict[str, float] = {}
    for key, value in items:
        found.update(flatten(value, f"{prefix}.{key}" if prefix else key))
    return found


def key_numbers(document: Any, patterns: list[str]) -> dict[str, float]:
    flat = flatten(document)
    return {
        path: value
        for path, value in flat.items()
        if any(fnmatch.fnmatchcase(path, pattern) for pattern in patterns)
    }


class Side:
    """One interpreter (and its environment) the command runs under."""

    def __init__(self, name: str, venv: Path, env: dict[str, str], store: str | None) -> None:
        self.name, self.venv, self.env, self.store = name, venv, env, store
        self.python = str(venv / "bin" / "python")
        self.runs: list[dict[str, Any]] = []

    def versions(self, source: Path) -> dict[str, Any]:
        done = subprocess.run(
            [self.python, "-c", VERSIONS_SCRIPT],
            env=self.env,
            cwd=source,
            capture_output=True,
            text=True,
            check=True,
        )
        return dict(json.loads(done.stdout))


def one_run(side: Side, command: list[str], args: argparse.Namespace, work: Path) -> dict[str, Any]:
    copy = None
    if side.store is not None:
        copy = work / f"store-{side.name}-{len(side.runs)}"
        started = time.perf_counter()
        shutil.copytree(side.store, copy)
        log(f"{side.name}: copied {side.store} in {time.perf_counter() - started:.1f} s")
    argv = [a.replace("{store}", str(copy)) if copy is not None else a for a in command]
    started = time.perf_counter()
    done = subprocess.run(
        [side.python, *argv],
        env=side.env,
        cwd=args.source,
        stdout=subprocess.PIPE,
        text=True,
        check=False,
        timeout=args.timeout_s,
    )
    run: dict[str, Any] = {
        "exit": done.returncode,
        "seconds": round(time.perf_counter() - started, 1),
    }
    if copy is not None:
        shutil.rmtree(copy, ignore_errors=True)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        run["stdout_tail"] = done.stdout[-2000:]
        return run
    run["numbers"] = key_numbers(report, args.key)
    for flag in ("content_ok",):
        if flag in report.get("summary", {}):
            run[flag] = report["summary"][flag]
    if args.keep_reports:
        run["report"] = report
    return run


def medians(runs: list[dict[str, Any]]) -> dict[str, float]:
    keys = sorted({k for run in runs for k in run.get("numbers", {})})
    return {
        key: round(statistics.median(vs), 4)
        for key in keys
        if (vs := [run["numbers"][key] for run in runs if key in run.get("numbers", {})])
    }


def ratios(top: dict[str, float], bottom: dict[str, float]) -> dict[str, float]:
    return {key: round(top[key] / bottom[key], 3) for key in top if bottom.get(key)}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="A bench command under the pinned and another Spark/Delta, alternating "
        "(JSON on stdout). The command follows '--': a bench script and its arguments."
    )
    parser.add_argument(
        "--other-venv", type=Path, default=PINNED_VENV, help="the other virtualenv (default: .venv)"
    )
    parser.add_argument(
        "--other-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable of the other side's runs only (repeat)",
    )
    parser.add_argument("--pinned-venv", type=Path, default=PINNED_VENV)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--source",
        type=Path,
        default=REPO_DIR,
        help="the source tree both run (PYTHONPATH and working directory; default this one)",
    )
    parser.add_argument("--copy-store", default=None, help="store copied fresh for every run")
    parser.add_argument("--dv", action="store_true", help="add the other version with DVs on")
    parser.add_argument("--dv-store", default=None, help="store the --dv side copies")
    parser.add_argument("--work-dir", default=None, help="where the store copies go")
    parser.add_argument("--key", action="append", default=None, help="fnmatch pattern (repeat)")
    parser.add_argument("--timeout-s", type=float, default=3600.0, help="per run")
    parser.add_argument("--keep-reports", action="store_true", help="every run's whole JSON")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        parser.error("give the bench command after '--'")
    if args.key is None:
        args.key = list(DEFAULT_KEYS)
    if args.rounds < 1:
        parser.error("--rounds: at least 1")
    if any("=" not in item for item in args.other_env):
        parser.error("--other-env: NAME=VALUE")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.source = args.source.resolve()
    env = {**os.environ, "PYTHONPATH": str(args.source)}
    other_env = dict(item.split("=", 1) for item in args.other_env)
    sides = [
        Side("pinned", args.pinned_venv, env, args.copy_store),
        Side("other", args.other_venv, {**env, **other_env}, args.copy_store),
    ]
    if args.dv:
        dv_env = {**env, "PYSPARK_SUBMIT_ARGS": f"--conf {DV_CONF} pyspark-shell"}
        sides.append(Side("other_dv", args.other_venv, dv_env, args.dv_store or args.copy_store))
    report: dict[str, Any] = {
        "benchmark": "engines",
        "command": args.command,
        "other_env": other_env,
        "source": str(args.source),
        "rounds": args.rounds,
        "load_avg_1m_at_start": round(os.getloadavg()[0], 2),
        "sides": {},
    }
    for side in sides:
        report["sides"][side.name] = side.versions(args.source)
        log(f"{side.name}: {report['sides'][side.name]}")
    work = Path(tempfile.mkdtemp(prefix="scd-engines-", dir=args.work_dir))
    started = time.perf_counter()
    try:
        for number in range(args.rounds):
            order = sides[number % len(sides) :] + sides[: number % len(sides)]
            for side in order:
                log(f"round {number + 1}/{args.rounds}: {side.name} ({side.python})")
                run = one_run(side, args.command, args, work)
                run["load_avg_1m"] = round(os.getloadavg()[0], 2)
                # The numbers of every run as they come: a run cut short keeps those before.
                log(f"  {side.name}: exit {run['exit']}, {run['seconds']} s, {run.get('numbers')}")
                side.runs.append(run)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for side in sides:
        report["sides"][side.name].update({"medians": medians(side.runs), "runs": side.runs})
    by_name = {s.name: report["sides"][s.name]["medians"] for s in sides}
    report["ratio_other_to_pinned"] = ratios(by_name["other"], by_name["pinned"])
    if args.dv:
        report["ratio_other_dv_to_other"] = ratios(by_name["other_dv"], by_name["other"])
    report["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
    report["elapsed_s"] = round(time.perf_counter() - started, 1)
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0 if all(r["exit"] == 0 for s in sides for r in s.runs) else 1


if __name__ == "__main__":
    sys.exit(main())
