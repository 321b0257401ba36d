"""The ``scd`` command line: one entry point, subcommands contributed by each package.

    scd [--config FILE] [-v] COMMAND ...

Settings come from environment variables (``SCD_<SECTION>_*``) over the optional TOML file.
Errors end the command with a one-line reason and a non-zero exit code: 2 for bad usage or
configuration, 1 for a failed operation.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError
from pydantic_settings import SettingsError

from journal import cli as journal_commands
from journal import keys as journal_keys
from publisher import cli as publisher_cli
from runtime.config import config_file, describe_settings_error
from runtime.errors import ConfigError, ScdError
from runtime.logs import configure_logging, enable_stack_dumps
from runtime.redaction import redact
from scd import demo
from subscriber import cli as subscriber_cli


class CommandModule(Protocol):
    def register(self, sub: Any) -> None: ...


# Each package contributes its subcommands (``register(subparsers)``); this shell is the one
# place that imports both the publisher and the subscriber.
COMMAND_MODULES: tuple[CommandModule, ...] = (
    journal_commands,
    journal_keys,
    publisher_cli,
    subscriber_cli,
    demo,
)
# Commands that run a daemon log at INFO by default; the others only warn.
DAEMONS = frozenset({"publisher", "subscriber", "demo"})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scd", description="scd: journal-based content distribution"
    )
    parser.add_argument("--config", type=Path, help="TOML configuration file")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging("INFO" if args.verbose or args.command in DAEMONS else "WARNING")
    if args.command in DAEMONS:
        # `kill -USR1` shows where a daemon waits, as docs/operations.md promises.
        enable_stack_dumps()
    try:
        with config_file(args.config):
            code: int = args.func(args)
            return code
    except (ValidationError, SettingsError) as exc:
        # Never str(exc): pydantic's message quotes the values given, secrets included.
        print(f"scd: {describe_settings_error(exc)}", file=sys.stderr)
        return 2
    except ConfigError as exc:
        print(f"scd: {redact(str(exc))}", file=sys.stderr)
        return 2
    except ScdError as exc:
        print(f"scd: error: {redact(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
