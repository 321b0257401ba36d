"""``scd demo``: the embedded default, on one machine with no external servers.

Starts a publisher (with its REST API) and two subscribers in this process on the SQLite
journal, a filesystem blob store and local Spark; distributes a sample site (with one binary
large enough to be stored by reference and one package large enough to spill); shows the
queues draining; exports each subscriber's content and compares it with the source. Exits 0
only when every export equals the source, byte for byte.

What it prints is a short story (scd/demo_output.py); the logs of scd and Spark go to a
file (``-v``: to standard error). ``--keep-running`` leaves everything up for a look at the
console afterwards.
"""

from __future__ import annotations

import argparse
import filecmp
import logging
import random
import secrets
import shutil
import tempfile
import threading
import time
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr

from blobstore.factory import open_blob_store
from blobstore.settings import BlobStoreSettings
from journal.factory import open_journal
from journal.settings import JournalSettings
from journal.topics import topic_specs
from publisher.client import PublisherClient
from runtime.http_server import AppServer
from scd.demo_output import QueueTable, Story, logs_to

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
# Files the demo reads back over each subscriber's read API: a page, and the binary stored by
# reference in the blob store.
SERVED_FILES = ("index.html", "images/hero.bin")
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


# The sample site's requests: shallow pages, deep trees (one with a binary stored by
# reference), one package large enough to spill, a node carried by the request, its
# deletion, and a TEST package (delivered, never queued).
REQUESTS: list[dict[str, Any]] = [
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


@dataclass(frozen=True)
class DemoOptions:
    subscribers: int = 2
    verbose: bool = False
    keep_running: bool = False
    port: int = 0


def run_demo(workdir: Path, options: DemoOptions, log_path: Path | None = None) -> int:
    """The demo in ``workdir``; logs go to ``log_path`` unless verbose."""
    story = Story()
    log_path = None if options.verbose else (log_path or workdir / "demo.log")
    story.start(workdir, log_path, options.subscribers)
    with ExitStack() as stack:
        if log_path is not None:
            # Entered first, left last: the shutdown's log lines land in the file too.
            stack.enter_context(logs_to(log_path))
            # py4j says goodbye at interpreter exit, after the log file is let go.
            logging.getLogger("py4j").setLevel(logging.WARNING)
        try:
            return _run(workdir, options, story, stack)
        except Exception as exc:
            story.line(f"result: FAILED: {exc}")
            raise
        finally:
            stack.close()  # everything stopped before the log's location is the last word
            if log_path is not None:
                story.line(f"log file: {log_path}")


def _run(workdir: Path, options: DemoOptions, story: Story, stack: ExitStack) -> int:
    from publisher.agent import PublisherAgent
    from publisher.api import create_app
    from publisher.settings import PublisherSettings
    from subscriber.agent import SubscriberAgent
    from subscriber.export import export_tree
    from subscriber.fleet.view import AgentsView
    from subscriber.http import HealthServer
    from subscriber.reads.api import ReadApi
    from subscriber.settings import SubscriberSettings
    from subscriber.spark import spark_session
    from subscriber.store.delta import DeltaStore

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
        for i in range(1, options.subscribers + 1)
    ]
    # A token of this run only: the console asks for it before any action.
    token = secrets.token_urlsafe(18)
    journal = stack.enter_context(open_journal(js))
    blobs = stack.enter_context(open_blob_store(bs))
    journal.create_topics(topic_specs(js))
    publisher = PublisherAgent(
        PublisherSettings(
            api_token=SecretStr(token), content_root=site, instance_id="demo-publisher"
        ),
        js,
        journal,
        blobs,
    ).start()
    stack.callback(publisher.stop)
    api = AppServer(create_app(publisher), name="publisher API", port=options.port)
    api.start()
    stack.callback(api.stop)
    story.line(f"  console         {api.url}/console   (token {token})")
    story.line(f"  REST API        {api.url}   (OpenAPI at {api.url}/docs)")
    started = time.monotonic()
    story.line(f"starting Spark and {options.subscribers} subscribers ...")
    spark = spark_session(sub_settings[0], "scd-demo")
    stack.callback(spark.stop)
    agents = []
    for settings in sub_settings:
        # One SparkSession per agent (shared JVM): commit settings are per session.
        store = DeltaStore(spark.newSession(), settings.store_path)
        agent = SubscriberAgent(settings, journal, store, blobs).start()
        stack.callback(agent.stop)
        agents.append(agent)
    story.line(f"  ready in {time.monotonic() - started:.1f} s")
    # The subscribers' read API, as a daemon of these agents serves it (subscriber/daemon.py).
    view = AgentsView(agents)
    reads = ReadApi(view, blobs, None)
    stack.callback(reads.close)
    endpoint = HealthServer(view.health, view.ready, view.metrics, reads=reads)
    endpoint.start()
    stack.callback(endpoint.stop)
    story.line(f"  read API        {endpoint.url}/agents/<subscriber>/content/<path>")

    story.line("distributing the sample site through the REST API:")
    client = stack.enter_context(PublisherClient(api.url, token))
    offsets = []
    for body in REQUESTS:
        answer = client.distribute(body)
        story.distributed(body, answer)
        offsets.append(answer["offset"])

    story.line("queues draining (packages each subscriber has processed):")
    if not _drain(client, agents, offsets, QueueTable(story)):
        story.line(f"result: FAILED, the queues did not drain within {DRAIN_TIMEOUT_S:.0f} s")
        return 1

    story.line("verification: each subscriber's content exported and compared with the source")
    failures = 0
    for agent in agents:
        target = workdir / f"export-{agent.name}"
        report = export_tree(agent.store, blobs, "/", target)
        problems = compare_trees(site, target)
        story.verified(agent.name, report.files, report.file_bytes, problems)
        failures += bool(problems)
    story.line(
        "reads over HTTP: each subscriber serves a page and a binary, checked with the source"
    )
    for agent in agents:
        problems = served_differences(endpoint.url, agent.name, site)
        story.served(agent.name, SERVED_FILES, problems)
        failures += bool(problems)
    if failures:
        story.line(f"result: FAILED, {failures} of {len(agents)} subscribers differ from the site")
    else:
        story.line(
            f"result: OK, every subscriber ({len(agents)} of {len(agents)}) holds and serves "
            "the distributed site byte for byte"
        )
    if options.keep_running:
        story.line(f"still running: the console is at {api.url}/console; Ctrl-C stops the demo")
        _wait_for_interrupt()
    return 1 if failures else 0


def served_differences(url: str, agent: str, site: Path) -> list[str]:
    """What ``agent``'s read API serves of SERVED_FILES that differs from the source: each
    file's node (GET /content) and its bytes (GET /binaries, checked there by size and
    sha256, and here against the file)."""
    problems = []
    with httpx.Client(base_url=f"{url}/agents/{agent}", timeout=30) as http:
        for name in SERVED_FILES:
            node = http.get(f"/content/{name}")
            if node.status_code != 200:
                problems.append(f"/content/{name}: {node.status_code} {node.text[:200]}")
                continue
            data = http.get(f"/binaries/{name}")
            expected = (site / name).read_bytes()
            if data.status_code != 200 or data.content != expected:
                problems.append(f"/binaries/{name}: {data.status_code}, {len(data.content)} B")
    return problems


def _drain(
    client: PublisherClient, agents: list[Any], offsets: list[int], table: QueueTable
) -> bool:
    """Show each subscriber's progress until all processed every package; False on timeout."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    started = time.monotonic()
    try:
        while True:
            states = {q["subscriberAgentName"]: q["state"] for q in client.queues()}
            rows = [
                (
                    agent.name,
                    states.get(agent.name, "STARTING"),
                    sum(1 for o in offsets if o <= agent.processed_offset),
                    len(offsets),
                )
                for agent in agents
            ]
            table.show(rows)
            if all(done == total for _, _, done, total in rows) and all(
                state == "IDLE" for _, state, _, _ in rows
            ):
                break
            if time.monotonic() > deadline:
                return False
            time.sleep(QUEUE_POLL_S)
    finally:
        table.close()
    table.story.line(f"  drained in {time.monotonic() - started:.1f} s")
    return True


def _wait_for_interrupt() -> None:
    with suppress(KeyboardInterrupt):  # Ctrl-C ends the wait, then the demo stops cleanly
        threading.Event().wait()


def cmd_demo(args: argparse.Namespace) -> int:
    options = DemoOptions(
        subscribers=args.subscribers,
        verbose=args.verbose or args.demo_verbose,
        keep_running=args.keep_running,
        port=args.port,
    )
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        if any(args.workdir.iterdir()):
            raise SystemExit(f"scd demo: {args.workdir} is not empty")
        return run_demo(args.workdir, options)
    # The work directory goes when the demo ends; the log stays for a look afterwards.
    with (
        tempfile.TemporaryDirectory(prefix="scd-demo-") as tmp,
        tempfile.NamedTemporaryFile(prefix="scd-demo-", suffix=".log", delete=False) as log,
    ):
        return run_demo(Path(tmp), options, Path(log.name))


def register(sub: Any) -> None:
    demo = sub.add_parser(
        "demo", help="run publisher + subscribers embedded and distribute a sample site"
    )
    demo.add_argument("--workdir", type=Path, help="keep everything here (an empty directory)")
    demo.add_argument("--subscribers", type=int, default=2, choices=range(1, 6), metavar="N")
    demo.add_argument(
        "--keep-running",
        action="store_true",
        help="keep the publisher, its console and the subscribers up after the run (Ctrl-C)",
    )
    demo.add_argument(
        "--port", type=int, default=0, help="port of the REST API and console (default: any)"
    )
    demo.add_argument(
        "-v",
        "--verbose",
        dest="demo_verbose",
        action="store_true",
        help="logs on standard error instead of the log file",
    )
    demo.set_defaults(func=cmd_demo)
