"""The agents file: several subscriber agents in one daemon (``SCD_SUBSCRIBER_AGENTS_FILE``).

A TOML file with one ``[[agent]]`` table per agent::

    [[agent]]
    name = "edge-a"
    store_path = "s3a://stores/edge-a"

    [[agent]]
    name = "edge-b"
    store_path = "s3a://stores/edge-b"
    max_retries = 5          # any per-agent subscriber setting, by its field name

Every agent starts from the daemon's own settings (``SCD_SUBSCRIBER_*``, the configuration
file's ``[subscriber]`` table) and overrides what its table sets. What the process shares is
refused in a table: the journal, the blob store, the HTTP endpoint and Spark.

The file is configuration from outside, so it is checked strictly and at bounded cost: at most
``MAX_FILE_BYTES`` and ``MAX_AGENTS`` agents; unknown keys, a missing or malformed name or
store path, a duplicate name, two agents on one store (or one store inside another) are
errors naming the file, the agent and the key, never a value. Retrying cannot fix any of them.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from runtime.errors import ConfigError
from subscriber.errors import StorePathError
from subscriber.settings import SubscriberSettings
from subscriber.writer.location import ForeignStore, S3Store, store_location

# A file listing a hundred agents with a few overrides each is about 20 KB: 1 MiB is far
# beyond any real one and bounds what a hostile file costs to parse.
MAX_FILE_BYTES = 1 << 20
# The design's scale is up to 100 subscribers per publisher; one Spark driver for more than
# that is not a deployment this was measured for (docs/benchmarks.md#subscriber_hundred).
MAX_AGENTS = 128
# Names label metrics, thread names and writer-lease owners: printable, no spaces, bounded.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")
# Settings of the process, not of one agent: one journal client, one blob store client, one
# HTTP endpoint and one Spark driver serve every agent.
PROCESS_SETTINGS = frozenset(
    {
        "agents_file",
        "journal",
        "blobstore",
        "http_host",
        "http_port",
        "spark_master",
        "spark_jars",
        "spark_jars_installed",
        "spark_shuffle_partitions",
        "spark_codegen",
        "spark_driver_memory",
        "concurrent_commits",
        "fold_worker",
    }
)
# Keys of an [[agent]] table besides the per-agent settings (``agent_name`` is ``name``).
OWN_KEYS = frozenset({"name", "store_path"})


def agent_settings(base: SubscriberSettings) -> list[SubscriberSettings]:
    """The settings of every agent the daemon runs: ``base`` alone without an agents file,
    else one per ``[[agent]]`` table of it."""
    if base.agents_file is None:
        return [base]
    path = Path(base.agents_file)
    set_in_base = sorted({"agent_name", "store_path"} & base.model_fields_set)
    if set_in_base:
        raise ConfigError(
            f"{', '.join(set_in_base)} set for the daemon, but the agents file {path} names "
            "each agent and its store: set them there (name, store_path)"
        )
    tables = read_agents_file(path)
    return [_settings_of(base, path, index, table) for index, table in enumerate(tables)]


def read_agents_file(path: Path) -> list[dict[str, Any]]:
    """The ``[[agent]]`` tables of the file, checked for shape, names and store paths."""
    document = _load(path)
    unknown = sorted(set(document) - {"agent"})
    if unknown:
        raise ConfigError(
            f"agents file {path}: unknown key(s) {', '.join(unknown)}; it holds [[agent]] "
            "tables only"
        )
    tables = document.get("agent")
    if not isinstance(tables, list) or not tables:
        raise ConfigError(f"agents file {path}: no [[agent]] table")
    if len(tables) > MAX_AGENTS:
        raise ConfigError(f"agents file {path}: {len(tables)} agents, at most {MAX_AGENTS}")
    names: dict[str, int] = {}
    stores: dict[str, str] = {}
    for index, table in enumerate(tables):
        where = f"agents file {path}: agent #{index + 1}"
        if not isinstance(table, dict):
            raise ConfigError(f"{where} is not a table")
        name = table.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise ConfigError(
                f"{where}: name must be 1-128 letters, digits or . _ @ - (starting with a "
                "letter or digit)"
            )
        if name in names:
            raise ConfigError(f"{where}: name {name} is agent #{names[name] + 1}'s already")
        names[name] = index
        stores[_check_store(f"{where} ({name})", table.get("store_path"), stores)] = name
    return tables


def _load(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read the agents file {path}: {exc.strerror}") from exc
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"agents file {path} is larger than {MAX_FILE_BYTES} bytes")
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"agents file {path} is not UTF-8 text") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"agents file {path} is not valid TOML: {exc}") from exc


def _check_store(where: str, store: object, stores: dict[str, str]) -> str:
    """``store`` is a path no agent before (``stores``: key -> agent) uses, nor nests in;
    its key."""
    if not isinstance(store, str) or not store.strip() or len(store) > 4096:
        raise ConfigError(f"{where}: store_path must be a non-empty path or URL (4096 at most)")
    key = _store_key(where, store)
    for other_key, other in stores.items():
        if key == other_key:
            raise ConfigError(f"{where}: store_path is {other}'s store as well")
        if key.startswith(other_key + "/") or other_key.startswith(key + "/"):
            raise ConfigError(f"{where}: store_path and {other}'s store lie inside one another")
    return key


def _store_key(where: str, store: str) -> str:
    """One spelling per store: two agents writing one store would fence each other out
    (``s3://`` and ``s3a://`` name the same objects)."""
    try:
        location = store_location(store)
    except StorePathError as exc:
        raise ConfigError(f"{where}: store_path: {exc}") from None
    if isinstance(location, S3Store):
        return f"s3://{location.bucket}/{location.prefix}".rstrip("/")
    if isinstance(location, ForeignStore):
        return location.canonical
    return os.path.normpath(os.path.abspath(os.path.expanduser(location.directory)))


def _settings_of(
    base: SubscriberSettings, path: Path, index: int, table: dict[str, Any]
) -> SubscriberSettings:
    name = table["name"]
    where = f"agents file {path}: agent #{index + 1} ({name})"
    allowed = (set(SubscriberSettings.model_fields) - PROCESS_SETTINGS - {"agent_name"}) | OWN_KEYS
    for key in sorted(table):
        if key in PROCESS_SETTINGS:
            raise ConfigError(
                f"{where}: {key} is a setting of the daemon, shared by all its agents; set it "
                "for the daemon, not in an [[agent]] table"
            )
        if key not in allowed:
            close = difflib.get_close_matches(key, sorted(allowed), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"{where}: unknown key {key}{hint}")
    values = {field: getattr(base, field) for field in SubscriberSettings.model_fields}
    values.update({k: v for k, v in table.items() if k not in OWN_KEYS})
    values.update(agent_name=name, store_path=table["store_path"], agents_file=None)
    try:
        return SubscriberSettings(**values)
    except ValidationError as exc:
        # The key and the rule, never the value (pydantic's message quotes it).
        rules = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors(include_url=False, include_context=False, include_input=False)
        )
        raise ConfigError(f"{where}: {rules}") from None
