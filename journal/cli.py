"""Journal subcommands of the scd CLI: ``scd topics create|show``, ``scd tail TOPIC``."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from google.protobuf.json_format import MessageToDict

from journal.api import Journal, Position
from journal.factory import open_journal
from journal.settings import JournalSettings
from journal.topics import topic_specs
from journal.wire.messages import decode
from runtime.errors import DecodeError

# How long `scd tail` waits for more records before it stops (unless --follow).
TAIL_IDLE_S = 1.0


def journal_settings(args: argparse.Namespace) -> JournalSettings:
    overrides: dict[str, Any] = {
        k: v
        for k, v in {
            "backend": args.backend,
            "bootstrap_servers": args.bootstrap,
            "sqlite_path": args.sqlite_path,
        }.items()
        if v is not None
    }
    return JournalSettings(**overrides)


def position(text: str) -> Position:
    if text == "earliest":
        return Position.earliest()
    if text == "latest":
        return Position.latest()
    if text.lstrip("-").isdigit():
        value = int(text)
        return Position.latest(value) if value < 0 else Position.at(value)
    raise argparse.ArgumentTypeError(
        f"invalid position {text!r}: use earliest, latest, an offset, or -N for the last N"
    )


def _with_journal(args: argparse.Namespace) -> tuple[JournalSettings, Journal]:
    settings = journal_settings(args)
    return settings, open_journal(settings)


def cmd_topics_create(args: argparse.Namespace) -> int:
    settings, journal = _with_journal(args)
    with journal:
        specs = topic_specs(settings)
        journal.create_topics(specs)
        for spec in specs:
            print(f"{spec.name}\t{spec.partitions} partition(s)\tretention {spec.retention_ms} ms")
    return 0


def cmd_topics_show(args: argparse.Namespace) -> int:
    settings, journal = _with_journal(args)
    with journal:
        print("topic\tpartition\tearliest\tlatest")
        for spec in topic_specs(settings):
            for p in range(journal.partitions(spec.name)):
                earliest = journal.earliest_offset(spec.name, p)
                latest = journal.latest_offset(spec.name, p)
                print(f"{spec.name}\t{p}\t{earliest}\t{latest}")
    return 0


def cmd_tail(args: argparse.Namespace) -> int:
    _, journal = _with_journal(args)
    shown = 0
    with journal, journal.consumer(args.topic, args.start) as consumer:
        idle_since = time.monotonic()
        while args.count is None or shown < args.count:
            records = consumer.poll(0.2)
            if not records:
                if not args.follow and time.monotonic() - idle_since > TAIL_IDLE_S:
                    break
                continue
            idle_since = time.monotonic()
            for record in records:
                line: dict[str, object] = {
                    "topic": record.topic,
                    "partition": record.partition,
                    "offset": record.offset,
                    "timestamp_ms": record.timestamp_ms,
                    "type": record.headers.get("type"),
                }
                try:
                    line["message"] = MessageToDict(decode(record.headers, record.value))
                except DecodeError as exc:
                    line["error"] = str(exc)
                print(json.dumps(line), flush=True)
                shown += 1
                if args.count is not None and shown >= args.count:
                    break
    return 0


def add_journal_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=["kafka", "sqlite"], help="journal backend")
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers (host:port,...)")
    parser.add_argument("--sqlite-path", help="embedded journal database file")


def register(sub: Any) -> None:
    topics = sub.add_parser("topics", help="create or show the journal topics")
    topics_sub = topics.add_subparsers(dest="action", required=True)
    create = topics_sub.add_parser("create", help="create the topics that do not exist")
    create.set_defaults(func=cmd_topics_create)
    show = topics_sub.add_parser("show", help="offsets of every topic partition")
    show.set_defaults(func=cmd_topics_show)
    for parser in (create, show):
        add_journal_options(parser)

    tail = sub.add_parser("tail", help="print a topic's records as JSON lines")
    tail.add_argument("topic")
    tail.add_argument(
        "--from",
        dest="start",
        type=position,
        default=Position.latest(-10),
        help="earliest, latest, an offset, or -N for the last N (default -10)",
    )
    tail.add_argument("-n", "--count", type=int, help="stop after this many records")
    tail.add_argument("-f", "--follow", action="store_true", help="keep waiting for records")
    add_journal_options(tail)
    tail.set_defaults(func=cmd_tail)
