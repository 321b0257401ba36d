"""Failover benchmark: a subscriber moves from region A's log to region B's MirrorMaker 2 copy.

Real components: two Kafka clusters (deploy/kafka.sh), MirrorMaker 2 (deploy/mirrormaker.sh)
copying A's package and command topics to B under renamed topics whose offsets differ from A's
(records deleted from A before mirroring began), the S3 server, local Spark with Delta.

A subscriber imports the first half of ``--packages`` packages (sequence-numbered, as the
publisher numbers them) from A and is stopped; the second half is written to A meanwhile. The
same store is then opened by a subscriber configured for B (bootstrap and topic names only).
Measured: stop in A to the first import in B (and to the last), and from the stores' own
records, packages applied twice or missed (both must be 0).

    .venv/bin/python -m bench.regions_failover --packages 40
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from blobstore.factory import open_blob_store
from journal.kafka.journal import KafkaJournal
from journal.settings import JournalSettings
from journal.wire import messages as m
from subscriber.agent import SubscriberAgent
from subscriber.store.delta import DeltaStore
from tests import services
from tests.regions.mirror import (
    MIRROR_KINDS,
    Flow,
    delete_before,
    journal_settings,
    mirror_maker,
    on_b,
    wait_records,
)
from tests.subscriber import harness as h
from tests.subscriber.packages import node, package

# Records deleted from A's package topic before MirrorMaker starts: B's offsets are A's minus
# this, so the stored offset is wrong on B.
EARLY = 5
IMPORT_TIMEOUT_S = 600.0


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def agent(
    spark: Any, journal: KafkaJournal, js: JournalSettings, s3: services.S3Service, store: Path
) -> SubscriberAgent:
    bs = h.blob_settings(s3, services.unique_name("failover"), store.parent)
    settings = h.subscriber_settings(js, bs, store)
    return SubscriberAgent(settings, journal, DeltaStore(spark, str(store)), open_blob_store(bs))


def wait(condition: Any, what: str) -> float:
    deadline = time.monotonic() + IMPORT_TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.01)
    return time.monotonic()


def run(packages: int) -> dict[str, Any]:
    half = packages // 2
    topics = services.unique_topics(services.unique_name("failover"))
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        log("starting regions A and B, S3 and Spark")
        (kafka_a, _), (kafka_b, _) = (
            stack.enter_context(services.own_native_kafka("bench-a")),
            stack.enter_context(services.own_native_kafka("bench-b")),
        )
        s3 = stack.enter_context(services.provide_s3())
        spark = stack.enter_context(services.local_spark())
        a = stack.enter_context(KafkaJournal(kafka_a.bootstrap))
        b = stack.enter_context(KafkaJournal(kafka_b.bootstrap))
        js_a = journal_settings(kafka_a, topics)
        js_b = journal_settings(kafka_b, topics, mirrored=True)
        h.create_topics(a, js_a)
        h.create_topics(b, journal_settings(kafka_b, topics))
        for i in range(EARLY):
            a.send(topics["package"], f"early-{i}".encode())
        delete_before(kafka_a.bootstrap, topics["package"], EARLY)
        flows = [Flow("ra", "rb", [topics[k] for k in MIRROR_KINDS])]
        clusters = {"ra": kafka_a.bootstrap, "rb": kafka_b.bootstrap}
        stack.enter_context(mirror_maker("mm2-bench", clusters, flows, Path(tmp)))

        def send(n: int) -> int:
            path = f"/r/page-{n}"
            pkg = package(f"p{n}", m.ReqType.ADD, [(path, True)], [node(path, n=n)])
            return h.send_package(a, js_a, pkg, sequence=n)

        store = Path(tmp) / "store"
        first = [send(n) for n in range(1, half + 1)]
        in_a = agent(spark, a, js_a, s3, store)
        in_a.start()
        wait(lambda: in_a.processed_offset == first[-1], "region A's imports")
        in_a.stop()
        stopped = time.monotonic()
        imported_a = in_a.counters.imported
        for n in range(half + 1, packages + 1):
            send(n)
        in_b = agent(spark, b, js_b, s3, store)
        in_b.start()
        try:
            first_import = wait(lambda: in_b.counters.imported >= 1, "the first import in B")
            last = b.latest_offset(on_b(topics["package"])) - 1
            wait_records(b, on_b(topics["package"]), packages)
            done = wait(lambda: in_b.processed_offset == last, "region B's imports")
        finally:
            in_b.stop()
        state = in_b.store.state
        assert state is not None
        applied = {
            int(n.path.rsplit("-", 1)[1]) for n in in_b.store.nodes() if n.path.startswith("/r/")
        }
        imports = imported_a + in_b.counters.imported
        return {
            "benchmark": "regions_failover",
            "packages": packages,
            "imported_in_a": imported_a,
            "imported_in_b": in_b.counters.imported,
            "skipped_as_applied_in_b": in_b.loop.sequences.replays,
            "applied_twice": imports - len(applied),
            "missed": packages - len(applied),
            "sequence_applied": state.sequences.get(h.PUB),
            "offset_shift_a_minus_b": EARLY,
            "stop_in_a_to_first_import_in_b_s": round(first_import - stopped, 2),
            "stop_in_a_to_last_import_in_b_s": round(done - stopped, 2),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", type=int, default=40)
    args = parser.parse_args()
    if args.packages < 2:
        parser.error("--packages must be at least 2")
    print(json.dumps(run(args.packages), indent=2))


if __name__ == "__main__":
    main()
