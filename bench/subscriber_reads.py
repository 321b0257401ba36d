"""Node reads of the subscriber's read API: p50/p99 at 1 and 16 concurrent clients, and the
read model's build time and RSS.

A memory store of ``--nodes`` nodes (sections of 100 pages, each with a title, a long and a
small inline binary) is built by commits of ``--batch`` nodes; a read model is built from it
(the same index a Delta store's model builds, from delta-rs rows instead of Python objects)
and served on a real endpoint. Each client reads random nodes over its own keep-alive
connection, from a process of their own (asyncio: one core for all 16); the model is read
directly too, from threads (the read's own cost, without the endpoint). ``--store DIR`` reads
an existing Delta store instead (the million-node store of bench/subscriber_bigstore.py): the
model is built from the table through delta-rs.

With ``wrk`` installed (Debian's ``wrk``), ``wrk_reads`` loads the endpoint from C, so the
clients are not the limit: 1 and 16 connections, random nodes, in rounds that alternate the
product's endpoint (a node read in the event loop) with the baseline ``PooledReads`` (every read
in the read pool, node reads too), side by side in one run.

    .venv/bin/python -m bench.subscriber_reads                  # JSON on stdout
    .venv/bin/python -m bench.subscriber_reads --store /tmp/scd-bigstore/store
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import json
import multiprocessing
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from blobstore.local import LocalBlobStore
from journal.content.package import Binary, BlobRef, Node
from runtime.stats import percentile
from subscriber.http import Health, HealthServer
from subscriber.reads import documents
from subscriber.reads.api import ReadApi
from subscriber.reads.delta_tree import DeltaTree
from subscriber.reads.model import ReadModel
from subscriber.reads.sources import read_model
from subscriber.settings import SubscriberSettings
from subscriber.store.commits import ObservedCommits
from subscriber.store.memory import MemoryStore
from subscriber.tree_reader import storage_options
from tests.subscriber.packages import add, new_change_set, node
from tests.subscriber.reads import OneModel


class PooledReads(ReadApi):
    """The baseline: every read in the read pool, node reads too."""

    async def _read(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["inline"] = False
        return await super()._read(*args, **kwargs)


WRK_SCRIPT = """
local paths = {%s}
request = function()
  return wrk.format("GET", "/content" .. paths[math.random(#paths)])
end
done = function(summary, latency, requests)
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write
    + summary.errors.status + summary.errors.timeout
  io.write(string.format('\\n{"p50_ms": %%.3f, "p99_ms": %%.3f, "reads": %%d, "errors": %%d, '
    .. '"reads_per_s": %%.0f}\\n', latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.requests, errors, summary.requests / (summary.duration / 1e6)))
end
"""


def wrk_reads(
    urls: dict[str, str], paths: list[str], rounds: int, seconds: int
) -> dict[str, Any] | None:
    """wrk at 1 and 16 connections against each variant's endpoint, alternating, ``rounds``
    times; None without wrk."""
    wrk = shutil.which("wrk")
    if wrk is None:
        return None
    sample = random.Random(7).sample(paths, min(len(paths), 5000))
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(WRK_SCRIPT % ", ".join(json.dumps(p) for p in sample))
    results: dict[str, Any] = {}
    for connections in (1, 16):
        for _ in range(rounds):
            for variant, url in urls.items():
                done = subprocess.run(
                    [wrk, "-t1", f"-c{connections}", f"-d{seconds}s", "-s", script.name, url],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                line = done.stdout.strip().splitlines()[-1]
                results.setdefault(f"{variant}_c{connections}", []).append(json.loads(line))
    Path(script.name).unlink()
    return results


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory_model(
    nodes: int, batch: int, workdir: Path
) -> tuple[ReadModel, list[str], MemoryStore | None]:
    store = MemoryStore()
    store.open()
    paths = [f"/site/s{i // 100}/p{i % 100}" for i in range(nodes)]
    for first in range(0, nodes, batch):
        chunk = [
            node(p, title=f"page {p}", n=7, data=b"x" * 64) for p in paths[first : first + batch]
        ]
        store.commit(
            new_change_set([add(first // batch, f"/site/s{first // 100}", *chunk, deep=False)])
        )
    model = read_model(SubscriberSettings(agent_name="bench"), store, workdir, lambda: None)
    assert model is not None
    return model, paths, store


def delta_model(location: str, workdir: Path) -> tuple[ReadModel, list[str], MemoryStore | None]:
    table = DeltaTree(location, storage_options(location, None))
    model = ReadModel("bench", table.read, table.latest, ObservedCommits(lambda: -1), workdir)
    return model, [], None


def http_clients(url: str, paths: list[str], count: int, reads: int) -> list[float]:
    """``count`` concurrent clients, each on its own keep-alive connection, in one process
    of their own (in the server's, they would take its GIL; one process each, the cores)."""

    async def client(seed: int) -> list[float]:
        rng = random.Random(seed)
        latencies = []
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            for _ in range(reads):
                started = time.perf_counter()
                answer = await http.get("/content" + rng.choice(paths))
                latencies.append(time.perf_counter() - started)
                assert answer.status_code == 200, answer.text
        return latencies

    async def run() -> list[float]:
        runs = await asyncio.gather(*(client(seed) for seed in range(count)))
        return [t for latencies in runs for t in latencies]

    return asyncio.run(run())


def over_http(url: str, paths: list[str], count: int, reads: int) -> dict[str, Any]:
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        pool.submit(int).result()  # the process started
        started = time.perf_counter()
        latencies = pool.submit(http_clients, url, paths, count, reads).result()
        return summary(latencies, count, time.perf_counter() - started)


Reader = Callable[[random.Random, list[str], int], list[float]]  # (rng, paths, reads) -> s


def direct(model: ReadModel) -> Reader:
    """A reader of the model itself: the read's own cost, without the endpoint."""

    def client(rng: random.Random, paths: list[str], reads: int) -> list[float]:
        latencies = []
        for _ in range(reads):
            started = time.perf_counter()
            path = rng.choice(paths)
            answer = model.read(functools.partial(documents.subtree, path=path, depth=0, prefix=""))
            latencies.append(time.perf_counter() - started)
            assert answer.value is not None
        return latencies

    return client


def clients(how: Reader, paths: list[str], count: int, reads: int) -> dict[str, Any]:
    latencies: list[float] = []
    lock = threading.Lock()

    def client(seed: int) -> None:
        mine = how(random.Random(seed), paths, reads)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(count)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return summary(latencies, count, time.perf_counter() - started)


def summary(latencies: list[float], count: int, elapsed: float) -> dict[str, Any]:
    return {
        "clients": count,
        "reads": len(latencies),
        "p50_ms": round(percentile(latencies, 50) * 1000, 2),
        "p99_ms": round(percentile(latencies, 99) * 1000, 2),
        "reads_per_s": round(len(latencies) / elapsed),
    }


# Binaries read over HTTP: a small one (first byte) and a large one (throughput), stored by
# reference in the local blob store, as the publisher stores binaries above 16 KiB.
BINARY_SIZES = (32 * 1024, 16 * 1024 * 1024)
BINARY_READS = 50


def add_binaries(
    model: ReadModel, store: MemoryStore, blobs: LocalBlobStore
) -> list[tuple[str, int]]:
    """Commit one node per BINARY_SIZES with its jcr:data by reference; their paths, sizes."""
    made = []
    for i, size in enumerate(BINARY_SIZES):
        data = random.Random(i).randbytes(size)
        digest = hashlib.sha256(data).hexdigest()
        key = f"binaries/{digest}"
        blobs.put_bytes(key, data)
        path = f"/bin/b{i}"
        n = Node(path=path)
        n.properties["jcr:data"].binary_value.CopyFrom(
            Binary(ref=BlobRef(key=key, size=size, sha256=digest))
        )
        offset = 10**6 + i
        store.commit(new_change_set([add(offset, path, n, deep=False)]))
        made.append((path, size))
    assert model.wait_version(store.shared.version, 60), "the binaries were not indexed"
    return made


def binary_reads(url: str, path: str, size: int) -> dict[str, Any]:
    """First byte (p50/p99 over BINARY_READS reads) and MB/s of whole reads of one binary."""
    first: list[float] = []
    whole: list[float] = []
    with httpx.Client(base_url=url, timeout=60) as http:
        for _ in range(BINARY_READS):
            started = time.perf_counter()
            with http.stream("GET", f"/binaries{path}") as answer:
                assert answer.status_code == 200, answer.status_code
                chunks = answer.iter_raw()
                got = len(next(chunks))
                first.append(time.perf_counter() - started)
                got += sum(len(c) for c in chunks)
            whole.append(time.perf_counter() - started)
            assert got == size, (got, size)
    return {
        "bytes": size,
        "first_byte_p50_ms": round(percentile(first, 50) * 1000, 2),
        "first_byte_p99_ms": round(percentile(first, 99) * 1000, 2),
        "mb_per_s": round(size / statistics.median(whole) / 1e6, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--reads", type=int, default=2000, help="per client at 1 client")
    parser.add_argument("--store", help="an existing Delta store to read instead")
    parser.add_argument("--workdir", default="/tmp/scd-bench-reads")
    parser.add_argument("--wrk-rounds", type=int, default=3, help="0: no wrk runs")
    parser.add_argument("--wrk-seconds", type=int, default=5)
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    before = rss_mib()
    model, paths, store = (
        delta_model(args.store, workdir)
        if args.store
        else memory_model(args.nodes, args.batch, workdir)
    )
    model.start()
    assert model.wait_version(0, 3600), "the read model was not built"
    if not paths:  # a Delta store: a sample of its paths
        paths = model.read(
            lambda r: [n.path for _, n in zip(range(20000), r.all_nodes(), strict=False)]
        ).value
    report: dict[str, Any] = {
        "store": args.store or f"memory, {args.nodes} nodes",
        "build_s": round(model.last_build.seconds, 2),
        "model_nodes": model.last_build.nodes,
        "max_rss_mib_after_build": round(rss_mib(), 1),
        "max_rss_mib_before_build": round(before, 1),
    }
    blobs = LocalBlobStore(workdir / "blobs")
    binaries = add_binaries(model, store, blobs) if store is not None else []
    api = ReadApi(OneModel(model), blobs, None)
    health = Health(agent="bench", instance_id="i", processed_offset=0, state="IDLE")
    with HealthServer(lambda: health, lambda: (True, ""), lambda: b"", reads=api) as server:
        report["http"] = [
            over_http(server.url, paths, 1, args.reads),
            over_http(server.url, paths, 16, max(1, args.reads // 8)),
        ]
        if binaries:
            report["binaries"] = [binary_reads(server.url, path, size) for path, size in binaries]
        if args.wrk_rounds > 0:
            pooled = PooledReads(OneModel(model), blobs, None)
            with HealthServer(
                lambda: health, lambda: (True, ""), lambda: b"", reads=pooled
            ) as baseline:
                report["wrk"] = wrk_reads(
                    {"event_loop": server.url, "pooled_baseline": baseline.url},
                    paths,
                    args.wrk_rounds,
                    args.wrk_seconds,
                )
            pooled.close()
    report["direct"] = [
        clients(direct(model), paths, 1, args.reads),
        clients(direct(model), paths, 16, max(1, args.reads // 8)),
    ]
    api.close()
    model.stop()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
