"""The ``scd`` command line: one entry point, subcommands contributed by each package.

    scd [--config FILE] [-v] COMMAND ...

Settings come from environment variables (``SCD_<SECTION>_*``) over the optional TOML file.
Errors end the command with a one-line reason and a non-zero exit code: 2 for bad usage or
configuration, 1 for a failed operation.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from pydantic import ValidationError

from journal.config import config_file
from journal.errors import ConfigError, ScdError
from journal.logs import configure_logging

# Modules that add subcommands (``register(subparsers)``), imported when the CLI starts so
# that journal/ never imports the publisher or subscriber packages at module level.
COMMAND_MODULES = (
    "journal.commands",
    "journal.keys",
    "publisher.cli",
    "subscriber.cli",
    "journal.demo",
)
# Commands that run a daemon log at INFO by default; the others only warn.
DAEMONS = frozenset({"publisher", "subscriber", "demo"})
# Environment prefix of each settings model, to name a bad setting the way users set it.
ENV_PREFIXES = {
    "JournalSettings": "SCD_JOURNAL_",
    "BlobStoreSettings": "SCD_BLOB_",
    "PublisherSettings": "SCD_PUBLISHER_",
    "SubscriberSettings": "SCD_SUBSCRIBER_",
}

Command = Callable[[argparse.Namespace], int]


class Subparsers(Protocol):
    def add_parser(self, name: str, **kwargs: object) -> argparse.ArgumentParser: ...


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scd", description="scd: journal-based content distribution"
    )
    parser.add_argument("--config", type=Path, help="TOML configuration file")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(sub)
    return parser


def describe_validation_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    field = "__".join(str(p) for p in first["loc"])
    prefix = ENV_PREFIXES.get(exc.title)
    where = f"{prefix}{field.upper()}" if prefix and field else f"{exc.title}.{field}"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"invalid setting {where}: {first['msg']}{more}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging("INFO" if args.verbose or args.command in DAEMONS else "WARNING")
    try:
        with config_file(args.config):
            code: int = args.func(args)
            return code
    except ValidationError as exc:
        print(f"scd: {describe_validation_error(exc)}", file=sys.stderr)
        return 2
    except ConfigError as exc:
        print(f"scd: {exc}", file=sys.stderr)
        return 2
    except ScdError as exc:
        print(f"scd: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
