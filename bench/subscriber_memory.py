"""Subscriber memory under hostile and large packages: peak RSS of a subscriber process while it
imports packages at the decoded-size limit and packages that inflate far beyond it.

Two configurations side by side, each in a fresh process on the same journal:

* ``bounded``: the defaults (a package decodes to at most SCD_SUBSCRIBER_MAX_PACKAGE_BYTES,
  64 MiB; a batch, and the batch read ahead, hold at most SCD_SUBSCRIBER_BATCH_MAX_BYTES,
  128 MiB, of decoded packages);
* ``unbounded``: the limits before they existed (512 MiB per package, no byte budget).

The workload (written once to an embedded SQLite journal): ``--at-limit`` packages that decode
to just under 64 MiB (16 nodes of one 3.9 MiB string each, compressing to ~60 KB), all
replacing the same subtree so the store holds one at a time, then ``--bombs`` records of
about 0.5 MB that inflate to 480 MiB (a single string property, which the content rules refuse
once decoded). The store is the in-memory one of the tests: what is measured is the
subscriber's own path (poll, inflate, decode, check, fold, commit), not Spark's.

    .venv/bin/python -m bench.subscriber_memory            # JSON on stdout
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

from journal.content.package import (
    PACKAGE_TYPE,
    ContentPackage,
    FilterRoot,
    Node,
    checksum,
)
from journal.factory import open_journal
from journal.settings import JournalSettings, TopicSettings
from journal.topics import topic_specs
from journal.wire import messages as m

MIB = 1024 * 1024
CONFIGS: dict[str, dict[str, Any]] = {
    "bounded": {},
    "unbounded": {"max_package_bytes": 512 * MIB, "batch_max_bytes": 1 << 50},
}


DECODED: dict[str, int] = {}  # package id -> decoded bytes


def envelope(package: ContentPackage, *, level: int = 6) -> bytes:
    """The package codec's bytes (journal/content/package.py), compressed harder than the
    publisher does so that a large package fits a record."""
    raw = package.SerializeToString()
    DECODED[package.package_id] = len(raw)
    return b"SCDP\x01\x01" + zlib.compress(raw, level)


def at_limit(index: int) -> bytes:
    root = "/big"
    nodes = [Node(path=f"{root}/n{i}") for i in range(16)]
    for i, node in enumerate(nodes):
        node.properties["text"].string_value = chr(ord("a") + (index + i) % 26) * (int(3.9 * MIB))
    package = ContentPackage(
        package_id=f"limit{index}", req_type=m.ReqType.ADD, roots=[FilterRoot(path=root, deep=True)]
    )
    package.nodes.extend(nodes)
    return envelope(package)


def bomb(index: int) -> bytes:
    node = Node(path="/bomb")
    node.properties["text"].string_value = "x" * (480 * MIB)
    package = ContentPackage(
        package_id=f"bomb{index}", req_type=m.ReqType.ADD, roots=[FilterRoot(path="/bomb")]
    )
    package.nodes.append(node)
    return envelope(package, level=9)


def write_workload(js: JournalSettings, at_limit_count: int, bombs: int) -> dict[str, Any]:
    sizes = []
    with open_journal(js) as journal:
        journal.create_topics(topic_specs(js))
        payloads = [at_limit(i) for i in range(at_limit_count)]
        payloads += [bomb(i) for i in range(bombs)]
        for i, data in enumerate(payloads):
            sizes.append(len(data))
            message = m.PackageMessage(
                pub_sling_id="bench",
                pub_agent_name="publish",
                pkg_id=f"p{i}",
                req_type=m.ReqType.ADD,
                pkg_type=PACKAGE_TYPE,
                pkg_length=len(data),
                pkg_binary=data,
                checksum=checksum(data),
                created_ms=int(time.time() * 1000),
            )
            value, headers = m.encode(message)
            journal.send(js.topics.package, value, headers=headers)
    return {
        "records": len(sizes),
        "record_bytes_max": max(sizes),
        "record_bytes_total": sum(sizes),
        "decoded_mib": {k: round(v / MIB, 1) for k, v in DECODED.items()},
    }


def run_subscriber(journal_path: str, topics: dict[str, str], config: str) -> dict[str, Any]:
    """The child process: import everything, report peak RSS (VmHWM)."""
    from journal.settings import JournalSettings
    from subscriber.agent import SubscriberAgent
    from subscriber.settings import SubscriberSettings
    from subscriber.store.memory import MemoryStore

    js = JournalSettings(
        backend="sqlite",
        sqlite_path=Path(journal_path),
        topics=TopicSettings.model_validate(topics),
        max_message_bytes=8 * MIB,
    )
    values: dict[str, Any] = {
        "agent_name": "bench",
        "reset": "earliest",
        "journal": js,
        "blobstore": None,
        "poll_timeout_s": 0.2,
        **CONFIGS[config],
    }
    settings = SubscriberSettings(**values)
    with open_journal(js) as journal:
        end = journal.latest_offset(js.topics.package) - 1
        store = MemoryStore()
        agent = SubscriberAgent(settings, journal, store)
        started = time.perf_counter()
        agent.open()
        while agent.processed_offset < end:
            agent.run_once()
        elapsed = time.perf_counter() - started
        agent.loop.shutdown()
    return {
        "peak_rss_mib": round(vm_hwm_kib() / 1024, 1),
        "seconds": round(elapsed, 2),
        "commits": len(store.history),
        "largest_batch": max(hi - lo + 1 for lo, hi in store.history),
        "imported": agent.counters.imported,
        "permanent_failures": agent.counters.permanent_failures,
    }


def vm_hwm_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--at-limit", type=int, default=6)
    parser.add_argument("--bombs", type=int, default=2)
    parser.add_argument("--child", nargs=3, metavar=("JOURNAL", "TOPICS", "CONFIG"))
    args = parser.parse_args()
    if args.child:
        journal_path, topics, config = args.child
        print(json.dumps(run_subscriber(journal_path, json.loads(topics), config)))
        return 0
    with tempfile.TemporaryDirectory(prefix="scd-bench-memory-") as tmp:
        topics = {"package": "bench.package", "status": "bench.status", "discovery": "bench.disc"}
        topics |= {"command": "bench.command", "event": "bench.event"}
        js = JournalSettings(
            backend="sqlite",
            sqlite_path=Path(tmp) / "journal.db",
            topics=TopicSettings.model_validate(topics),
            max_message_bytes=8 * MIB,
        )
        print(f"writing {args.at_limit} + {args.bombs} packages ...", file=sys.stderr)
        workload = write_workload(js, args.at_limit, args.bombs)
        results: dict[str, Any] = {}
        for config in CONFIGS:
            print(f"importing with the {config} configuration ...", file=sys.stderr)
            child = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    str(js.sqlite_path),
                    json.dumps(topics),
                    config,
                ],
                capture_output=True,
                text=True,
                env={**os.environ, "SCD_LOG_LEVEL": "WARNING"},
                check=True,
            )
            results[config] = json.loads(child.stdout.strip().splitlines()[-1])
    report = {
        "benchmark": "subscriber_memory",
        "workload": {
            "at_limit_packages": args.at_limit,
            "bombs": args.bombs,
            **workload,
        },
        "results": results,
        "peak_rss_ratio_unbounded_to_bounded": round(
            results["unbounded"]["peak_rss_mib"] / results["bounded"]["peak_rss_mib"], 2
        ),
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
