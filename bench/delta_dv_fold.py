"""A fold with deletion vectors next to the store's fold, on copies of one generated store.

The store's fold (subscriber.maintenance.rewrites) rewrites every data file holding a row
the fold removes. With deletion vectors (``delta.enableDeletionVectors``, a table property) a
MERGE ... WHEN MATCHED THEN DELETE keyed on the same rows only marks them, in a small file
per touched data file. Per round, two copies of the store (bench/subscriber_bigstore.py
``generate``) take the same commits (one package each: page updates and deep page deletes,
seeded), then one folds as the store does (``rewrite``) and the other enables deletion vectors
and deletes the folded rows with that MERGE (``dv_merge``). Reported per variant: the fold's
time, the bytes it wrote, a count of the current tree afterwards (timed: the read that pays for
deletion vectors) and that both variants leave the same tree; an error is reported as it came
(with delta-spark 4.0.1 the MERGE fails on the store's ``path`` column).

    .venv/bin/python -m bench.delta_dv_fold --store /tmp/big --pages 20000 --packages 40

JSON on stdout, progress on stderr. bench/engines.py runs it under two Delta versions.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import subscriber_bigstore as big
from subscriber.maintenance.delta_table import quoted
from subscriber.maintenance.scheduler import MaintenancePolicy
from subscriber.store.current_tree import current_nodes_sql, folded_rows_sql
from subscriber.store.delta import DeltaStore

VARIANTS = ("rewrite", "dv_merge")


def log(message: str) -> None:
    print(f"[delta_dv_fold] {message}", file=sys.stderr, flush=True)


def table_bytes(location: Path) -> int:
    return sum(p.stat().st_size for p in location.rglob("*") if p.is_file())


def commit_packages(store: DeltaStore, args: argparse.Namespace, first: int) -> None:
    """``args.packages`` commits of one package: alternately an update of a page and a deep
    delete of a page (the same ones for every copy: seeded)."""
    rng = random.Random(args.seed)
    for k in range(args.packages):
        offset = first + k
        page = rng.randrange(args.pages)
        if k % 2 == 0:
            package = big.page_package(f"upd-{offset}", page, offset)
        else:
            package = big.delete_package(f"del-{offset}", big.page_path(page))
        big.timed_commit(store, [big.unit(offset, package)])


def fold_rewrite(store: DeltaStore) -> None:
    assert store.state is not None
    while store.state.scopes:
        store.fold(MaintenancePolicy().fold_max_scopes)


def fold_dv_merge(spark: Any, location: str) -> dict[str, Any]:
    table = quoted(location)
    started = time.perf_counter()
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    enable_s = time.perf_counter() - started
    up_to = spark.sql(f"SELECT max(offset) AS o FROM {table} WHERE kind = 'scope'").first()
    assert up_to is not None
    assert up_to["o"] is not None
    folded = spark.sql(folded_rows_sql(table, int(up_to["o"])))
    folded.createOrReplaceTempView("scd_folded")
    spark.sql(
        f"MERGE INTO {table} t USING scd_folded f "
        "ON t.kind = f.kind AND t.path = f.path AND t.offset = f.offset "
        "WHEN MATCHED THEN DELETE"
    )
    metrics = spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").first()
    assert metrics is not None
    wanted = ("numDeletionVectorsAdded", "numTargetRowsDeleted", "numTargetFilesRemoved")
    op = metrics["operationMetrics"] or {}
    return {
        "enable_s": round(enable_s, 2),
        "operation": metrics["operation"],
        **{k: int(op[k]) for k in wanted if k in op},
    }


def one_variant(spark: Any, variant: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    location = work / f"store-{variant}"
    shutil.copytree(args.store, location)
    store = DeltaStore(spark, str(location))
    state = store.open()
    assert state.offset is not None
    commit_packages(store, args, state.offset + 1)
    assert store.state is not None
    result: dict[str, Any] = {"scopes": store.state.scopes}
    before = table_bytes(location)
    started = time.perf_counter()
    try:
        if variant == "rewrite":
            fold_rewrite(store)
        else:
            result.update(fold_dv_merge(spark, str(location)))
    except Exception as exc:  # what happens is the result (the MERGE fails on Delta 4.0)
        result["error"] = str(exc).splitlines()[0][:300]
        log(f"{variant}: {result['error']}")
        return result
    finally:
        result["fold_s"] = round(time.perf_counter() - started, 2)
    result["bytes_written"] = table_bytes(location) - before
    started = time.perf_counter()
    current = spark.sql(f"SELECT count(*) AS n FROM ({current_nodes_sql(quoted(str(location)))})")
    row = current.first()
    result["current_nodes"] = int(row["n"]) if row is not None else -1
    result["current_read_s"] = round(time.perf_counter() - started, 2)
    shutil.rmtree(location, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description="deletion-vector fold next to the store's")
    parser.add_argument("--store", required=True, help="a generated store (copied per variant)")
    parser.add_argument("--pages", type=int, default=100_000, help="pages it was made with")
    parser.add_argument("--packages", type=int, default=40, help="commits before the fold")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work-dir", default=None, help="where the copies go")
    args = parser.parse_args()
    spark = big.session("scd-bench-dv-fold")
    work = Path(tempfile.mkdtemp(prefix="scd-dv-fold-", dir=args.work_dir))
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    try:
        for number in range(args.rounds):
            order = VARIANTS if number % 2 == 0 else VARIANTS[::-1]
            for variant in order:
                log(f"round {number + 1}/{args.rounds}: {variant}")
                runs[variant].append(one_variant(spark, variant, args, work))
                log(f"  {variant}: {runs[variant][-1]}")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    report: dict[str, Any] = {
        "benchmark": "delta_dv_fold",
        "pyspark": importlib.metadata.version("pyspark"),
        "delta_spark": importlib.metadata.version("delta-spark"),
        "packages": args.packages,
        "runs": runs,
    }
    for variant, done in runs.items():
        ok = [r for r in done if "error" not in r]
        report[variant] = {
            "errors": len(done) - len(ok),
            **(
                {
                    "fold_s_median": statistics.median(r["fold_s"] for r in ok),
                    "current_read_s_median": statistics.median(r["current_read_s"] for r in ok),
                    "bytes_written_median": statistics.median(r["bytes_written"] for r in ok),
                }
                if ok
                else {}
            ),
        }
    trees = {r["current_nodes"] for done in runs.values() for r in done if "error" not in r}
    report["same_tree"] = len(trees) <= 1
    json.dump(report, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
