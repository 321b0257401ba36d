"""Publisher subcommands of the scd CLI.

* ``scd publisher``: run the publisher daemon (REST API + agent) until SIGTERM.
* ``scd distribute``, ``scd queues`` (``pause``, ``resume``), ``scd clear``, ``scd cleanup``: talk
  to a running publisher's REST API (``--url``, default ``SCD_PUBLISHER_URL`` or
  http://127.0.0.1:8080; token from ``SCD_PUBLISHER_API_TOKEN``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from publisher.client import QUEUES_PAGE, PublisherClient
from runtime.progress import ProgressBar

DEFAULT_URL = "http://127.0.0.1:8080"


def cmd_publisher(_args: argparse.Namespace) -> int:
    from blobstore.settings import BlobStoreSettings
    from journal.settings import JournalSettings
    from publisher.daemon import run
    from publisher.settings import PublisherSettings

    return run(PublisherSettings(), JournalSettings(), BlobStoreSettings())


def _client(args: argparse.Namespace) -> PublisherClient:
    return PublisherClient(args.url, args.token or os.environ.get("SCD_PUBLISHER_API_TOKEN"))


def _requests(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.file is not None:
        try:
            text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
        except OSError as exc:
            raise SystemExit(f"scd distribute: cannot read {args.file}: {exc.strerror}") from None
        out = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise SystemExit(f"scd distribute: line {number}: not JSON: {exc}") from None
        return out
    if not args.paths and not args.deep:
        raise SystemExit("scd distribute: give paths, --deep paths, or --file")
    return [{"action": args.action, "paths": args.paths, "deepPaths": args.deep}]


def cmd_distribute(args: argparse.Namespace) -> int:
    requests = _requests(args)
    progress = ProgressBar("distribute") if len(requests) > 1 else None
    with _client(args) as client:
        for done, body in enumerate(requests, 1):
            result = client.distribute(body)
            if progress is None:
                print(json.dumps(result))
            else:
                progress(done, len(requests))
    if progress is not None:
        print(f"distributed {len(requests)} packages")
    return 0


def cmd_queues(args: argparse.Namespace) -> int:
    with _client(args) as client:
        queues = client.queues(page=QUEUES_PAGE)
    if args.json:
        print(json.dumps(queues, indent=2))
        return 0
    print(f"{'queue':<56} {'state':<8} {'size':>6} {'head':>7} {'lag ms':>8} {'errors':>6}")
    for q in queues:
        head = "-" if q["headOffset"] is None else str(q["headOffset"])
        print(
            f"{q['name']:<56} {q['state']:<8} {q['size']:>6} {head:>7} {q['lagMs']:>8} "
            f"{q['errorQueueSize']:>6}"
        )
    return 0


def cmd_queue_command(args: argparse.Namespace) -> int:
    with _client(args) as client:
        print(json.dumps(client.queue_command(args.queue, args.command)))
    return 0


def cmd_clear(args: argparse.Namespace) -> int:
    with _client(args) as client:
        print(json.dumps(client.clear(args.queue, args.mode, args.count, args.offset)))
    return 0


def cmd_cleanup(args: argparse.Namespace) -> int:
    with _client(args) as client:
        print(json.dumps(client.cleanup()))
    return 0


def _api_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url", default=os.environ.get("SCD_PUBLISHER_URL", DEFAULT_URL), help="publisher URL"
    )
    parser.add_argument("--token", help="API token (default: SCD_PUBLISHER_API_TOKEN)")


def register(sub: Any) -> None:
    daemon = sub.add_parser("publisher", help="run the publisher (REST API + agent)")
    daemon.set_defaults(func=cmd_publisher)

    dist = sub.add_parser("distribute", help="distribute paths through a running publisher")
    dist.add_argument(
        "action", nargs="?", default="ADD", choices=["ADD", "DELETE", "TEST", "INVALIDATE"]
    )
    dist.add_argument("paths", nargs="*", help="paths distributed shallow (the node only)")
    dist.add_argument("--deep", action="append", default=[], metavar="PATH", help="with subtree")
    dist.add_argument("--file", help="JSON lines of distribute requests ('-' for stdin)")
    _api_options(dist)
    dist.set_defaults(func=cmd_distribute)

    queues = sub.add_parser("queues", help="show the subscriber queues (or pause, resume one)")
    queues.add_argument("--json", action="store_true", help="JSON output")
    _api_options(queues)
    queues.set_defaults(func=cmd_queues)
    actions = queues.add_subparsers(dest="command")
    for command, text in (
        ("pause", "pause a subscriber: it imports nothing until resumed"),
        ("resume", "resume a paused subscriber"),
    ):
        action = actions.add_parser(command, help=text)
        action.add_argument("queue", help="queue name (see scd queues)")
        _api_options(action)
        action.set_defaults(func=cmd_queue_command)

    clear = sub.add_parser("clear", help="clear an editable subscriber's queue")
    clear.add_argument("queue", help="queue name (see scd queues)")
    clear.add_argument("mode", choices=["head", "first", "upTo", "all"])
    clear.add_argument("--count", type=int, help="items, with mode 'first' (default: all)")
    clear.add_argument("--offset", type=int, help="offset, with mode 'upTo'")
    _api_options(clear)
    clear.set_defaults(func=cmd_clear)

    cleanup = sub.add_parser("cleanup", help="run the package blob cleanup now")
    _api_options(cleanup)
    cleanup.set_defaults(func=cmd_cleanup)
