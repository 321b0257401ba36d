"""``scd demo``: the embedded default, on one machine with no external servers.

Starts a publisher (with its REST API) and two subscribers in this process on the SQLite
journal, a filesystem blob store and local Spark; distributes a sample site (with one binary
large enough to be stored by reference and one package large enough to spill); shows the
queues draining; exports each subscriber's content and compares it with the source. Exits 0
only when every export equals the source, byte for byte.
"""

from __future__ import annotations

import argparse
import filecmp
import logging
import random
import shutil
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from blobstore.factory import open_blob_store
from blobstore.settings import BlobStoreSettings
from journal.factory import open_journal
from journal.http_server import AppServer
from journal.settings import JournalSettings
from journal.topics import topic_specs

log = logging.getLogger(__name__)

SAMPLE_SITE = Path(__file__).with_name("demo_site")
# Seed of the generated sample files: the same site on every run.
SAMPLE_SEED = 20261121
# A binary above the publisher's 16 KiB threshold: stored once in the blob store, referenced.
LARGE_BINARY_BYTES = 256 * 1024
# Incompressible files under the binary threshold travel inline; this many of them make a
# package above the 800 KiB inline limit, so it spills to the blob store.
BULK_FILES = 80
BULK_FILE_BYTES = 12 * 1024
# How long the queues may take to drain (Spark starts in ~10-20 s on a small machine).
DRAIN_TIMEOUT_S = 600.0
QUEUE_POLL_S = 1.0
# Sidecar files the export writes for properties a plain file cannot carry.
SIDECAR_SUFFIX = ".props.json"


def make_sample_site(target: Path) -> Path:
    shutil.copytree(SAMPLE_SITE, target)
    rng = random.Random(SAMPLE_SEED)
    (target / "images" / "hero.bin").write_bytes(rng.randbytes(LARGE_BINARY_BYTES))
    bulk = target / "assets" / "bulk"
    bulk.mkdir(parents=True)
    for i in range(BULK_FILES):
        (bulk / f"part-{i:03d}.bin").write_bytes(rng.randbytes(BULK_FILE_BYTES))
    return target


def compare_trees(source: Path, exported: Path) -> list[str]:
    """Differences between two directory trees (export sidecars ignored); empty if equal."""
    problems: list[str] = []
    cmp = filecmp.dircmp(source, exported)
    problems += [f"missing in export: {source / n}" for n in cmp.left_only]
    problems += [
        f"not in source: {exported / n}" for n in cmp.right_only if not n.endswith(SIDECAR_SUFFIX)
    ]
    _, mismatch, errors = filecmp.cmpfiles(source, exported, cmp.common_files, shallow=False)
    problems += [f"content differs: {source / n}" for n in mismatch + errors]
    for name in cmp.common_dirs:
        problems += compare_trees(source / name, exported / name)
    return problems


def print_queues(queues: list[dict[str, Any]]) -> None:
    print(f"  {'queue':<52} {'state':<8} {'size':>5} {'head':>6}")
    for q in queues:
        head = q.get("headOffset")
        head_text = "-" if head is None else str(head)
        print(f"  {q['name']:<52} {q['state']:<8} {q['size']:>5} {head_text:>6}")


def run_demo(workdir: Path, subscribers: int) -> int:
    from publisher.agent import PublisherAgent
    from publisher.api import create_app
    from publisher.settings import PublisherSettings
    from subscriber.agent import SubscriberAgent
    from subscriber.content import export_tree
    from subscriber.delta_store import DeltaStore
    from subscriber.settings import SubscriberSettings
    from subscriber.spark import spark_session

    site = make_sample_site(workdir / "site")
    js = JournalSettings(backend="sqlite", sqlite_path=workdir / "journal.db")
    bs = BlobStoreSettings(backend="local", local_root=workdir / "blobs")
    sub_settings = [
        SubscriberSettings(
            agent_name=f"subscriber-{i}",
            store_path=str(workdir / f"store-{i}"),
            reset="earliest",
            editable=True,
            announce_interval_s=1.0,
            journal=js,
            blobstore=bs,
        )
        for i in range(1, subscribers + 1)
    ]
    print(f"scd demo in {workdir}")
    with ExitStack() as stack:
        journal = stack.enter_context(open_journal(js))
        blobs = stack.enter_context(open_blob_store(bs))
        journal.create_topics(topic_specs(js))
        publisher = PublisherAgent(
            PublisherSettings(dev_mode=True, content_root=site, instance_id="demo-publisher"),
            js,
            journal,
            blobs,
        ).start()
        stack.callback(publisher.stop)
        api = AppServer(create_app(publisher), name="publisher API")
        api.start()
        stack.callback(api.stop)
        print(f"publisher API on {api.url} (OpenAPI at {api.url}/docs)")
        print("starting Spark and the subscribers ...")
        spark = spark_session(sub_settings[0], "scd-demo")
        stack.callback(spark.stop)
        agents = []
        for settings in sub_settings:
            # One SparkSession per agent (shared JVM): commit settings are per session.
            agent = SubscriberAgent(
                settings, journal, DeltaStore(spark.newSession(), settings.store_path), blobs
            ).start()
            stack.callback(agent.stop)
            agents.append(agent)

        requests: list[dict[str, Any]] = [
            {"action": "ADD", "paths": ["/index.html", "/about.html"]},
            {"action": "ADD", "deepPaths": ["/css", "/docs", "/images"]},
            {"action": "ADD", "deepPaths": ["/assets"]},
            {
                "action": "ADD",
                "paths": ["/drafts"],
                "nodes": [{"path": "/drafts", "properties": {"title": "work in progress"}}],
            },
            {"action": "DELETE", "deepPaths": ["/drafts"]},
            {"action": "TEST", "paths": ["/"]},
        ]
        client = stack.enter_context(httpx.Client(base_url=api.url, timeout=120))
        last = -1
        for body in requests:
            answer = client.post("/distribute", json=body)
            answer.raise_for_status()
            result = answer.json()
            last = max(last, result["offset"])
            what = " ".join(body.get("paths", []) + body.get("deepPaths", []))
            spilled = "spilled to the blob store" if result["spilled"] else "inline"
            print(
                f"distributed {body['action']:<6} {what:<28} offset {result['offset']:>3}  "
                f"{result['size']:>8} bytes  {spilled}"
            )

        print("queues:")
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        shown = ""
        while True:
            queues = client.get("/queues").json()
            drained = (
                len(queues) == subscribers
                and all(q["size"] == 0 for q in queues)
                and all(a.processed_offset >= last for a in agents)
            )
            state = repr([(q["name"], q["size"]) for q in queues])
            if state != shown:
                print_queues(queues)
                shown = state
            if drained:
                break
            if time.monotonic() > deadline:
                print("scd demo: queues did not drain in time")
                return 1
            time.sleep(QUEUE_POLL_S)

        failures = 0
        for agent in agents:
            target = workdir / f"export-{agent.name}"
            report = export_tree(agent.store, blobs, "/", target)
            problems = compare_trees(site, target)
            verdict = "equals the source" if not problems else f"{len(problems)} differences"
            print(
                f"{agent.name}: exported {report.files} files ({report.file_bytes} bytes) "
                f"to {target}: {verdict}"
            )
            for problem in problems[:10]:
                print(f"  {problem}")
            failures += bool(problems)
        return 1 if failures else 0


def cmd_demo(args: argparse.Namespace) -> int:
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        if any(args.workdir.iterdir()):
            raise SystemExit(f"scd demo: {args.workdir} is not empty")
        return run_demo(args.workdir, args.subscribers)
    with tempfile.TemporaryDirectory(prefix="scd-demo-") as tmp:
        return run_demo(Path(tmp), args.subscribers)


def register(sub: Any) -> None:
    demo = sub.add_parser(
        "demo", help="run publisher + subscribers embedded and distribute a sample site"
    )
    demo.add_argument("--workdir", type=Path, help="keep everything here (an empty directory)")
    demo.add_argument("--subscribers", type=int, default=2, choices=range(1, 6), metavar="N")
    demo.set_defaults(func=cmd_demo)
