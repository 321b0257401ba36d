"""The current tree without a JVM: ``scd content ls`` before (Spark) and after (delta-rs), and
the current-tree time of every reader docs/content-store.md shows.

* ``ls``: ``scd content ls ROOT`` in a process of its own, ``--runs`` times per tree,
  alternating: the current tree and (``--before DIR``, a checkout whose ``scd content`` runs
  Spark) the one before, on each store given: wall time of the process (Python's start and
  imports included) and its peak RSS (the JVM's not counted: a child process), output to
  /dev/null; the listing's lines must be the same for both trees.
* ``readers``: the whole current tree of a store, in this process, by each reader ``--runs``
  times: scd's tree reader (subscriber/tree_reader.py, its nodes as Python objects), the
  DuckDB, polars and delta-rs queries of docs/content-store.md as the document writes them
  (their results as Arrow tables or polars frames), and Spark SQL (the documented query, its
  rows counted in Spark: a session started once, not timed). Rows and time per reader; every
  reader must find the same number of rows.

The stores: ``python -m bench.subscriber_bigstore generate`` makes them (``--pages 100000``: the
million-node store; ``--pages 30``: 312 nodes).

    .venv/bin/python -m bench.subscriber_tree_readers ls --store /tmp/small --store /tmp/big \\
        --root /content/site/en/products-and-solutions-00/category-00 --before /tmp/scd-before
    .venv/bin/python -m bench.subscriber_tree_readers readers --store /tmp/small --store /tmp/big

Everything prints JSON on stdout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.local import LOOPBACK_DRIVER, spark_jars

REPO_DIR = Path(__file__).resolve().parent.parent
DOC = REPO_DIR / "docs" / "content-store.md"
SECTION = "## The current tree from any Delta reader"
# Reports the imports' time, the command's own and the peak RSS on stderr's last line.
LS_SCRIPT = (
    "import resource, sys, time; started = time.perf_counter(); "
    "from scd.cli import main; imported = time.perf_counter(); "
    "code = main(['content', 'ls', sys.argv[1]]); "
    "print(imported - started, time.perf_counter() - imported, "
    "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr); sys.exit(code)"
)


def summary(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def scd_ls(tree: Path, store: str, root: str) -> dict[str, float | str]:
    """One ``scd content ls`` of ``tree``'s code: the process's seconds, its imports' and the
    command's, peak RSS (MiB), and a digest of its output."""
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "SCD_SUBSCRIBER_STORE_PATH": store,
        "SCD_SUBSCRIBER_SPARK_JARS": ",".join(spark_jars()),
    }
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", LS_SCRIPT, root],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"scd content ls in {tree} failed: {done.stderr[-2000:]}")
    imports, command, maxrss = done.stderr.strip().splitlines()[-1].split()
    return {
        "process_s": elapsed,
        "imports_s": float(imports),
        "command_s": float(command),
        "peak_rss_mib": int(maxrss) / 1024,
        "output": hashlib.sha256(done.stdout.encode()).hexdigest(),
    }


def ls(args: argparse.Namespace) -> dict[str, Any]:
    trees = {"after": REPO_DIR}
    if args.before:
        trees = {"before": Path(args.before).resolve(), **trees}
    result: dict[str, Any] = {"root": args.root, "runs": args.runs, "stores": {}}
    for store in args.store:
        runs: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
        outputs: set[str] = set()
        order = list(trees)
        for r in range(args.runs):
            for name in order if r % 2 == 0 else order[::-1]:
                run = scd_ls(trees[name], store, args.root)
                outputs.add(str(run.pop("output")))
                for key, value in run.items():
                    runs[name].setdefault(key, []).append(float(value))
                print(json.dumps({"store": store, "tree": name, **run}), file=sys.stderr)
        result["stores"][store] = {
            "same_output": len(outputs) == 1,
            **{name: {k: summary(v) for k, v in values.items()} for name, values in runs.items()},
        }
    return result


def reader_snippets() -> dict[str, str]:
    """The document's reader blocks (those computing ``tree``), by the module they import."""
    section = DOC.read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    found = {}
    for block in blocks:
        name = re.search(r"^import (\w+)", block, re.MULTILINE)
        if "tree = " in block and name is not None:
            found[{"pyarrow": "deltalake"}.get(name.group(1), name.group(1))] = block
    return found


def run_snippet(snippet: str, store: str) -> int:
    scope: dict[str, Any] = {"store": store, "options": {}}
    exec(snippet, scope)
    return int(scope["tree"].shape[0] if hasattr(scope["tree"], "shape") else len(scope["tree"]))


def readers(args: argparse.Namespace) -> dict[str, Any]:
    from subscriber.maintenance.delta_table import quoted
    from subscriber.settings import SubscriberSettings
    from subscriber.spark import spark_session
    from subscriber.store.current_tree import current_nodes_sql
    from subscriber.tree_reader import open_tree

    snippets = reader_snippets()
    spark = spark_session(
        SubscriberSettings(spark_jars=spark_jars()), "scd-bench-tree-readers", extra=LOOPBACK_DRIVER
    )

    def scd_reader(store: str) -> int:
        return sum(1 for _ in open_tree(store).iter_nodes())

    def spark_sql(store: str) -> int:
        return int(spark.sql(current_nodes_sql(quoted(store))).count())

    def documented(snippet: str) -> Callable[[str], int]:
        return lambda store: run_snippet(snippet, store)

    candidates: dict[str, Callable[[str], int]] = {
        "scd_tree_reader": scd_reader,
        **{name: documented(snippet) for name, snippet in snippets.items()},
        "spark_sql": spark_sql,
    }
    result: dict[str, Any] = {"runs": args.runs, "stores": {}}
    for store in args.store:
        times: dict[str, list[float]] = {name: [] for name in candidates}
        rows: dict[str, int] = {}
        for _ in range(args.runs):
            for name, read in candidates.items():
                started = time.perf_counter()
                rows[name] = read(store)
                times[name].append(time.perf_counter() - started)
                print(
                    json.dumps({"store": store, "reader": name, "s": times[name][-1]}),
                    file=sys.stderr,
                )
        result["stores"][store] = {
            "same_rows": len(set(rows.values())) == 1,
            "rows": rows,
            **{name: summary(values) for name, values in times.items()},
        }
    spark.stop()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("ls", "readers"):
        command = sub.add_parser(name)
        command.add_argument("--store", action="append", required=True, help="a store (repeat)")
        command.add_argument("--runs", type=int, default=3)
    sub.choices["ls"].add_argument("--root", default="/", help="the subtree listed")
    sub.choices["ls"].add_argument("--before", help="a checkout whose scd content runs Spark")
    args = parser.parse_args()
    print(json.dumps(ls(args) if args.command == "ls" else readers(args), indent=2))


if __name__ == "__main__":
    main()
