"""Cost of the writer guard: Delta commits of the content store with and without the
transaction id that fences out a deposed writer (subscriber/store/delta.py, one writer per
store).

Three local stores get the same commits, rotating which goes first: ``unguarded`` (used
unclaimed: no id), ``guarded`` (claimed with a writer epoch: every write carries
txnAppId/txnVersion, which Delta looks up in the commit, and the store precomputes the
snapshot state that lookup needs after each write, as the product does) and ``guarded_cold``
(the same without the precomputation: what the lookup alone costs). Each round commits one
package that adds a page of new nodes (a plain append, the common commit of a caught-up
subscriber) and one that updates an existing page (a new version and a scope). Reported:
p50/p95/mean per commit kind and variant, and the guarded/unguarded ratios of the medians.
Then, as a check that the guard guards: a second store object claims the guarded table with
the next epoch and the first one's commit must be refused.

    .venv/bin/python -m bench.subscriber_writer_guard [--rounds 150] > result.json
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.subscriber_import import local_session, machine_info
from journal.content.package import ContentPackage, FilterRoot, Node
from journal.wire import messages as m
from runtime.stats import percentile
from subscriber.errors import WriterDeposed
from subscriber.store.changes import ChangeSet, Unit
from subscriber.store.delta import DeltaStore

NODES_PER_PAGE = 4
VARIANTS = ("unguarded", "guarded", "guarded_cold")
WARMUP_ROUNDS = 5


def change_set(unit: Unit) -> ChangeSet:
    """One package as the import loop's unit of work."""
    changes = ChangeSet()
    changes.add(unit)
    return changes


def page(offset: int, number: int, version: int) -> Unit:
    nodes = []
    for i in range(NODES_PER_PAGE):
        node = Node(path=f"/site/p{number}" + ("" if i == 0 else f"/n{i}"))
        node.properties["title"].string_value = f"page {number} v{version}"
        node.properties["body"].string_value = "x" * 512
        nodes.append(node)
    package = ContentPackage(
        package_id=f"p{offset}",
        req_type=m.ReqType.ADD,
        roots=[FilterRoot(path=f"/site/p{number}", deep=True)],
        nodes=nodes,
    )
    return Unit(offset, "publish", package.package_id, package.req_type, package)


def session(work: Path) -> Any:
    return local_session(work, "scd-bench-writer-guard")


def summary(seconds: list[float]) -> dict[str, float]:
    return {
        "commits": len(seconds),
        "p50_s": round(statistics.median(seconds), 4),
        "p95_s": round(percentile(seconds, 95), 4),
        "mean_s": round(statistics.fmean(seconds), 4),
    }


def run(spark: Any, work: Path, rounds: int) -> dict[str, Any]:
    stores = {name: DeltaStore(spark, str(work / name)) for name in VARIANTS}
    stores["guarded"].claim(1, "bench")
    stores["guarded_cold"].claim(1, "bench")
    stores["guarded_cold"].guard.warm_state = lambda: None  # type: ignore[method-assign]
    for store in stores.values():
        store.open()
    seconds: dict[str, dict[str, list[float]]] = {
        name: {"append": [], "replace": []} for name in stores
    }
    offset = 0
    for r in range(WARMUP_ROUNDS + rounds):
        shift = r % len(stores)
        order = [*list(stores.items())[shift:], *list(stores.items())[:shift]]
        units = {
            "append": page(offset, r, 1),  # a new page
            "replace": page(offset + 1, r // 2, 2 + r),  # an existing page again
        }
        offset += 2
        for kind, unit in units.items():
            for name, store in order:
                changes = change_set(unit)
                started = time.perf_counter()
                store.commit(changes)
                if r >= WARMUP_ROUNDS:
                    seconds[name][kind].append(time.perf_counter() - started)
    result: dict[str, Any] = {
        name: {kind: summary(values) for kind, values in kinds.items()}
        for name, kinds in seconds.items()
    }
    for variant in ("guarded", "guarded_cold"):
        result[f"{variant}_over_unguarded_p50"] = {
            kind: round(result[variant][kind]["p50_s"] / result["unguarded"][kind]["p50_s"], 3)
            for kind in ("append", "replace")
        }
    # The guard guards: after a claim with the next epoch, the first store's commit fails.
    successor = DeltaStore(spark, stores["guarded"].location)
    successor.claim(2, "bench-successor")
    started = time.perf_counter()
    try:
        stores["guarded"].commit(change_set(page(offset, 0, 99)))
        refused = False
    except WriterDeposed:
        refused = True
    result["deposed_commit_refused"] = refused
    result["deposed_commit_s"] = round(time.perf_counter() - started, 4)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=150)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    report: dict[str, Any] = {"benchmark": "subscriber_writer_guard", "machine": machine_info()}
    report["settings"] = {
        "rounds": args.rounds,
        "warmup_rounds": WARMUP_ROUNDS,
        "nodes_per_package": NODES_PER_PAGE,
    }
    with tempfile.TemporaryDirectory(prefix="scd-writer-guard-") as tmp:
        work = Path(tmp)
        spark = session(work)
        try:
            report["result"] = run(spark, work, args.rounds)
        finally:
            spark.stop()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
