"""Cost of the sequence check (replays refused, subscriber/bookkeeper/sequences.py) per import
commit, against a store without it, in the same run.

For each store size (nodes written up front in one commit), two local Delta stores get the same
commits, rotating which goes first: ``baseline`` (packages not numbered: today's commit, no
sequence row) and ``numbered`` (every package numbered: the check runs and each commit appends
the agent's ``sequence`` row). Each round commits one package adding a page of new nodes.
Reported per size: p50/p95/mean commit time per variant, the numbered/baseline ratio of the
medians, and the time to open each store afterwards, after one warm-up open of each (open reads
the bookkeeping rows, which the sequence rows add to until a purge folds them). Separately, the
check itself in Python (``SequenceCheck.admit`` and the ChangeSet's bookkeeping) per record,
against adding the same unit without a number.

    .venv/bin/python -m bench.subscriber_sequence_check [--rounds 20] [--sizes 0,20000] > out.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.subscriber_import import local_session, machine_info
from bench.subscriber_writer_guard import NODES_PER_PAGE, change_set, page, summary
from journal.content.package import ContentPackage, FilterRoot, Node
from journal.wire import messages as m
from subscriber.bookkeeper.sequences import SequenceCheck
from subscriber.metrics import SubscriberMetrics
from subscriber.store.base import StoreState
from subscriber.store.changes import ChangeSet, Unit
from subscriber.store.delta import DeltaStore
from subscriber.store.memory import MemoryStore

VARIANTS = ("baseline", "numbered")
WARMUP_ROUNDS = 3
CHECK_CALLS = 200_000


def prefill(nodes: int) -> Unit:
    """One package of ``nodes`` nodes under /bulk: the store's size before the rounds."""
    package = ContentPackage(
        package_id="bulk",
        req_type=m.ReqType.ADD,
        roots=[FilterRoot(path="/bulk", deep=True)],
        nodes=[Node(path="/bulk")] + [Node(path=f"/bulk/n{i}") for i in range(nodes - 1)],
    )
    return Unit(0, "publish", "bulk", m.ReqType.ADD, package)


def one_size(spark: Any, work: Path, nodes: int, rounds: int) -> dict[str, Any]:
    stores = {name: DeltaStore(spark, str(work / f"{name}-{nodes}")) for name in VARIANTS}
    for store in stores.values():
        store.open()
        if nodes:
            store.commit(change_set(prefill(nodes)))
    seconds: dict[str, list[float]] = {name: [] for name in stores}
    offset = 1
    for r in range(WARMUP_ROUNDS + rounds):
        shift = r % len(stores)
        order = [*list(stores.items())[shift:], *list(stores.items())[:shift]]
        unit = page(offset, r, 1)
        for name, store in order:
            numbered = dataclasses.replace(unit, sequence=offset) if name == "numbered" else unit
            started = time.perf_counter()
            store.commit(change_set(numbered))
            if r >= WARMUP_ROUNDS:
                seconds[name].append(time.perf_counter() - started)
        offset += 1
    result: dict[str, Any] = {name: summary(values) for name, values in seconds.items()}
    result["numbered_over_baseline_p50"] = round(
        result["numbered"]["p50_s"] / result["baseline"]["p50_s"], 3
    )
    opened: dict[str, float] = {}
    for store in stores.values():  # warm-up: the first read of a table pays Spark's planning
        DeltaStore(spark, store.location).open()
    for name, store in stores.items():
        started = time.perf_counter()
        state = DeltaStore(spark, store.location).open()
        opened[name] = round(time.perf_counter() - started, 4)
        if name == "numbered":
            assert state.sequences == {"publish": offset - 1}, state.sequences
    result["open_s"] = opened
    return result


def check_cost() -> dict[str, float]:
    """Per record: adding a unit to a batch, with the check and a number, and without."""
    store = MemoryStore()
    store.state = StoreState(instance_id="bench", offset=None)
    check = SequenceCheck("bench", store, SubscriberMetrics("bench"))
    unit = Unit(0, "publish", "p", m.ReqType.TEST)

    def baseline() -> float:
        changes = ChangeSet()
        started = time.perf_counter()
        for i in range(CHECK_CALLS):
            changes.units.clear()  # ChangeSet.add checks the offset order
            changes.add(dataclasses.replace(unit, offset=i))
        return time.perf_counter() - started

    def numbered() -> float:
        changes = ChangeSet()
        started = time.perf_counter()
        for i in range(CHECK_CALLS):
            changes.units.clear()
            if check.admit("publish", i + 1, i, changes.sequences):
                changes.add(dataclasses.replace(unit, offset=i, sequence=i + 1))
        return time.perf_counter() - started

    base, checked = baseline(), numbered()
    return {
        "records": CHECK_CALLS,
        "baseline_us_per_record": round(base / CHECK_CALLS * 1e6, 3),
        "numbered_us_per_record": round(checked / CHECK_CALLS * 1e6, 3),
        "check_us_per_record": round((checked - base) / CHECK_CALLS * 1e6, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--sizes", default="0,20000", help="store sizes in nodes, comma-separated")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    report: dict[str, Any] = {"benchmark": "subscriber_sequence_check", "machine": machine_info()}
    report["settings"] = {
        "rounds": args.rounds,
        "warmup_rounds": WARMUP_ROUNDS,
        "nodes_per_package": NODES_PER_PAGE,
        "store_sizes_nodes": sizes,
    }
    report["check_in_python"] = check_cost()
    with tempfile.TemporaryDirectory(prefix="scd-sequence-check-") as tmp:
        work = Path(tmp)
        spark = local_session(work, "scd-bench-sequence-check")
        try:
            report["result"] = {
                f"{nodes}_nodes": one_size(spark, work, nodes, args.rounds) for nodes in sizes
            }
        finally:
            spark.stop()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
