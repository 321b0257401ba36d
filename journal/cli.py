"""The ``scd`` command line.

Settings come from environment variables (``SCD_JOURNAL_*``, see journal/settings.py); flags
override the most common ones. Errors end the command with a one-line reason and a non-zero
exit code: 2 for bad usage or configuration, 1 for a failed operation.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence

from google.protobuf.json_format import MessageToDict
from pydantic import ValidationError

from journal.api import Journal, Position
from journal.errors import DecodeError, ScdError
from journal.factory import open_journal
from journal.settings import JournalSettings
from journal.topics import topic_specs
from journal.wire.messages import decode

# How long `scd tail` waits for more records before it stops (unless --follow).
TAIL_IDLE_S = 1.0


def _settings(args: argparse.Namespace) -> JournalSettings:
    overrides = {
        k: v
        for k, v in {
            "backend": args.backend,
            "bootstrap_servers": args.bootstrap,
            "sqlite_path": args.sqlite_path,
        }.items()
        if v is not None
    }
    return JournalSettings(**overrides)


def _position(text: str) -> Position:
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


def cmd_topics_create(journal: Journal, settings: JournalSettings, _: argparse.Namespace) -> None:
    specs = topic_specs(settings)
    journal.create_topics(specs)
    for spec in specs:
        print(f"{spec.name}\t{spec.partitions} partition(s)\tretention {spec.retention_ms} ms")


def cmd_topics_show(journal: Journal, settings: JournalSettings, _: argparse.Namespace) -> None:
    print("topic\tpartition\tearliest\tlatest")
    for spec in topic_specs(settings):
        for p in range(journal.partitions(spec.name)):
            earliest, latest = (
                journal.earliest_offset(spec.name, p),
                journal.latest_offset(spec.name, p),
            )
            print(f"{spec.name}\t{p}\t{earliest}\t{latest}")


def cmd_tail(journal: Journal, _: JournalSettings, args: argparse.Namespace) -> None:
    shown = 0
    with journal.consumer(args.topic, args.start) as consumer:
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scd", description="scd: journal-based content distribution"
    )
    parser.add_argument("--backend", choices=["kafka", "sqlite"], help="journal backend")
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers (host:port,...)")
    parser.add_argument("--sqlite-path", help="embedded journal database file")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    topics = sub.add_parser("topics", help="create or show the journal topics")
    topics_sub = topics.add_subparsers(dest="action", required=True)
    topics_sub.add_parser("create", help="create the topics that do not exist").set_defaults(
        func=cmd_topics_create
    )
    topics_sub.add_parser("show", help="offsets of every topic partition").set_defaults(
        func=cmd_topics_show
    )

    tail = sub.add_parser("tail", help="print a topic's records as JSON lines")
    tail.add_argument("topic")
    tail.add_argument(
        "--from",
        dest="start",
        type=_position,
        default=Position.latest(-10),
        help="earliest, latest, an offset, or -N for the last N (default -10)",
    )
    tail.add_argument("-n", "--count", type=int, help="stop after this many records")
    tail.add_argument("-f", "--follow", action="store_true", help="keep waiting for records")
    tail.set_defaults(func=cmd_tail)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        settings = _settings(args)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        print(f"scd: invalid setting {where}: {first['msg']}", file=sys.stderr)
        return 2
    try:
        with open_journal(settings) as journal:
            args.func(journal, settings, args)
    except ScdError as exc:
        print(f"scd: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
