"""Typed subscriber settings (environment prefix ``SCD_SUBSCRIBER_``; the journal and the blob
store from ``SCD_JOURNAL_*`` and ``SCD_BLOB_*``, as for the publisher)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from blobstore.settings import BlobStoreSettings
from journal.content.package import MAX_DECODED_BYTES
from journal.settings import JournalSettings
from journal.wire.signing import check_key_ids, parse_key_list
from runtime.config import ScdSettings

# An entry-point name (the packaging spec's), bounded: it becomes a metric label.
HOOK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")

# Spark's local JVM refuses a heap below 1.5 times the 300 MiB it reserves.
SPARK_MIN_DRIVER_MEMORY = 450 << 20


class SubscriberSettings(ScdSettings):
    config_section = "subscriber"

    env_elsewhere: ClassVar[Mapping[str, str]] = {
        "journal": "SCD_JOURNAL_",
        "blobstore": "SCD_BLOB_",
    }

    model_config = SettingsConfigDict(env_prefix="SCD_SUBSCRIBER_", extra="forbid")

    agent_name: str = Field(default="subscriber", min_length=1)
    # Publisher agents whose packages this subscriber imports; others only advance the offset.
    pub_agents: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["publish"], min_length=1
    )
    store_path: str = ".scd/store"
    # Several agents in this one process, each with its name, store and overrides of these
    # settings (subscriber/fleet/agents_file.py, docs/operations.md); None: one agent, the
    # one these settings describe.
    agents_file: str | None = None
    # Where a brand-new store starts: Sling's default is the latest offset (new content only).
    reset: Literal["latest", "earliest"] = "latest"
    # Lag beyond retention (subscriber/bookkeeper/behind_log.py): continue past offsets the package
    # topic deleted before this subscriber read them, once, at the offset where the process starts.
    # Off: such a subscriber stops importing (state BEHIND_LOG) until an operator decides.
    accept_gap: bool = False
    editable: bool = False
    # Sling's default -1: block and retry forever; >= 0 gives up after that many retries.
    max_retries: int = -1
    # Staged (canary) import (subscriber/bookkeeper/staging.py, docs/operations.md): import a
    # package only once each of these (editable) subscribers reported it on the status topic;
    # a package one of them failed for good is held until cleared or resumed. Empty: off.
    staged_after: Annotated[list[str], NoDecode] = Field(default_factory=list, max_length=100)
    # How long a package waits for the canaries before the wait is logged and counted; it then
    # waits again (never given up).
    staged_wait_s: float = Field(default=300.0, gt=0)
    # Back-off between attempts of a failing package: Sling's 5 s doubling up to 15 min.
    retry_initial_s: float = Field(default=5.0, gt=0)
    retry_max_s: float = Field(default=900.0, gt=0)
    # Discovery announcement period (Sling: 10 s; the publisher's alive TTL is 30 s).
    announce_interval_s: float = Field(default=10.0, gt=0)
    # Most packages per commit when behind: a poll takes what the journal has ready, up to
    # this. A Delta commit has a fixed cost of about half a second here whatever its size, so
    # large batches amortize it; 2,000 packages of ~5 KB are ~10 MB of rows on the driver.
    batch_max: int = Field(default=2000, ge=1)
    # Decoded bytes of packages held for one commit, and again for the batch read ahead while
    # it commits: a batch ends once its packages reach this (a larger package goes alone).
    batch_max_bytes: int = Field(default=128 * 1024 * 1024, ge=1)
    # Largest package accepted, decoded: at least the publisher's SCD_PUBLISHER_MAX_PACKAGE_BYTES.
    # A larger one is a permanent failure (REMOVED_FAILED) instead of a memory spike.
    max_package_bytes: int = Field(default=MAX_DECODED_BYTES, ge=1)
    # How long one poll waits for packages: bounds shutdown and command latency when idle.
    poll_timeout_s: float = Field(default=0.5, gt=0)
    # Skipped (not-for-us) packages: store the offset at least every Nth skip (Sling: 10).
    skip_store_every: int = Field(default=10, ge=1)
    # Sent statuses and superseded offset rows are purged after this many commits.
    purge_every_commits: int = Field(default=100, ge=1)
    # Store maintenance in idle time (subscriber/maintenance/scheduler.py, docs/operations.md):
    # compaction, VACUUM of files removed longer ago than the retention (what a reader or a
    # copy of the store in progress may still need), deletion of log entries older than the
    # log retention (how far back time travel reaches). Fractions of an hour work (0.1: six
    # minutes); at 0 VACUUM would delete the files of the import it runs beside.
    maintenance_enabled: bool = True
    maintenance_retention_hours: float = Field(default=168.0, gt=0)
    maintenance_log_retention_hours: float = Field(default=24.0, gt=0)
    maintenance_interval_s: float = Field(default=3600.0, gt=0)
    maintenance_compact_min_files: int = Field(default=20, ge=2)
    # Compaction merges files below half this size into files of up to it. Larger files mean
    # fewer of them, but a fold rewrites the whole file holding a version it deletes, and that
    # copy stays on disk for the retention (bench/README.md).
    maintenance_target_file_bytes: int = Field(default=128 * 1024, ge=1024)
    # Replaced versions are folded out once the table grew by this share since the last fold:
    # smaller means fewer replaced versions read and kept, larger fewer rewrites of the table
    # (each kept on disk for the retention). subscriber/maintenance/scheduler.py.
    maintenance_fold_growth: float = Field(default=0.5, gt=0, le=10)
    # One writer per store (subscriber/writer/lease.py, docs/one-writer-per-store.md): the
    # writer renews its lease every renew_s; a standby takes over once the lease went
    # unrenewed for ttl_s (at most ttl_s + 2 * renew_s after the writer died). A shorter ttl
    # means a faster takeover, and a writer stalled longer than ttl_s - renew_s (a long GC or
    # I/O pause) steps down.
    writer_lease_ttl_s: float = Field(default=12.0, gt=0)
    writer_lease_renew_s: float = Field(default=2.0, gt=0)
    # A store on a scheme where scd has no lease every host sees (gs://, abfss://, hdfs://;
    # S3 and local paths have one: subscriber/writer/location.py) is refused at start, unless
    # this names a local directory: the operator vouches that every process writing the store
    # runs on this host, and its lease is a file there (flock).
    single_host_lease_dir: Path | None = None
    # Readiness (Sling's rules): ready once idle this long, or a package younger than the
    # message age was imported, or a package failed more than ready_max_retries times, or
    # ready_force_s after start at the latest. None turns a rule off.
    ready_idle_s: float | None = Field(default=10.0, ge=0)
    ready_max_message_age_s: float | None = Field(default=120.0, ge=0)
    ready_max_retries: int | None = Field(default=10, ge=0)
    ready_force_s: float | None = Field(default=300.0, ge=0)
    # Health/readiness/metrics HTTP endpoint (127.0.0.1); None: not served, 0: any free port.
    # Interface of that endpoint: loopback by default; 0.0.0.0 inside a container.
    http_host: str = "127.0.0.1"
    http_port: int | None = Field(default=None, ge=0, le=65535)
    # The read API on that endpoint (docs/read-api.md); off: /health, /ready and /metrics only.
    # A read token, when set, is required of every read (Authorization: Bearer).
    read_api: bool = True
    read_token: SecretStr | None = None
    # Where the read models keep their index (SQLite, about the size of the current tree);
    # None: a temporary directory of the process, removed when it stops.
    read_index_dir: Path | None = None
    spark_master: str = "local[2]"
    # Jars for Delta (and hadoop-aws for s3a:// stores); empty: Spark resolves them by Maven
    # coordinates. deploy/spark-jars.sh prefetches them for offline machines.
    spark_jars: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Every executor's host has the jars of spark_jars at the same paths (one image for the
    # drivers and the executors, or one host): they go on the driver's and the executors' class
    # paths instead of being copied by each driver to each of its executors (s3a's AWS SDK
    # bundle alone is 558 MB: about 10 s per executor on an idle host, and that much disk).
    spark_jars_installed: bool = False
    spark_shuffle_partitions: int = Field(default=2, ge=1)
    # Spark compiles Java for each new query plan and expression (whole-stage and expression
    # code generation, with Janino). The store's jobs are many and small (a commit of a few
    # hundred rows, a fold of a few thousand), where that compiling costs more CPU than it
    # saves: evaluated without it, commits and folds of a small store ran 15-40 % faster here
    # (bench/README.md, code generation). Large one-off scans run faster with it.
    spark_codegen: bool = False
    # A class-data archive of the Spark JVM (``scd spark-archive`` builds one;
    # subscriber/spark_archive.py): the driver starts about a quarter faster with it. One built
    # by another JDK or Spark is ignored; a missing one is logged and the JVM starts without.
    spark_class_archive: Path | None = None
    # Heap of the local Spark JVM (spark.driver.memory, a JVM size such as 512m or 2g; Spark
    # needs 450m at least). The subscriber's memory is that heap plus ~340 MiB the JVM needs
    # besides it, plus ~125 MiB of Python: 512m keeps it under 1 GiB, a million-node store
    # included (bench/README.md).
    spark_driver_memory: str = Field(default="512m", pattern=r"^[1-9][0-9]{0,5}[kKmMgG]$")
    # How many of the daemon's agents open or commit their stores at once (None: one per CPU
    # core); the others wait, agents not ready yet first (subscriber.fleet.commit_slots).
    concurrent_commits: int | None = Field(default=None, ge=1, le=1024)
    # Folds computed, and checkpoints written, by a process of the daemon's own at the lowest
    # CPU priority (subscriber.maintenance.fold_worker), so that they do not slow the imports: its
    # own local Spark JVM, started by a step and ended 2 minutes after the last (about 1 GiB
    # meanwhile).
    # With a Spark cluster (spark_master not local) the fold's tasks run on its executors and
    # there is no worker.
    fold_worker: bool = True

    # Import hooks (subscriber/hooks/, docs/import-hooks.md): names of entry points in the
    # group scd.import_hooks, run in this order before and after each package's import. A name
    # no installed package registers stops the start (subscriber.hooks.loading).
    import_hooks: Annotated[list[str], NoDecode] = Field(default_factory=list, max_length=20)
    # How long the import waits for one hook call; beyond it the call is a transient failure
    # (subscriber.hooks.runner: a hung hook costs this per attempt, never the import thread).
    import_hook_timeout_s: float = Field(default=30.0, gt=0, le=3600)

    # Signed records: public keys accepted for package and command records, as
    # "key_id=/path/key.pub,key_id2=base64:<raw 32 bytes>" (a table in TOML); several during a
    # key rotation. Empty: records are not checked. Loaded by
    # journal.wire.signing.verifier_from_settings.
    verify_keys: Annotated[dict[str, str], NoDecode] = Field(default_factory=dict)

    # The journal and the blob store are configured like the publisher's: SCD_JOURNAL_* and
    # SCD_BLOB_* (one setting, one place, whichever daemon reads it).
    journal: JournalSettings = Field(default_factory=JournalSettings)
    # Needed to import packages sent by reference and to read binaries; None: inline only.
    blobstore: BlobStoreSettings | None = Field(default_factory=lambda: _blob_settings_from_env())

    @field_validator(
        "spark_class_archive", "single_host_lease_dir", "read_index_dir", mode="before"
    )
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("pub_agents", "spark_jars", "import_hooks", "staged_after", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        return (
            [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else value
        )

    @model_validator(mode="after")
    def _canaries(self) -> SubscriberSettings:
        if self.agent_name in self.staged_after:
            raise ValueError("staged_after names this subscriber: it would wait for itself")
        return self

    @field_validator("import_hooks")
    @classmethod
    def _hook_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not HOOK_NAME.fullmatch(name):
                raise ValueError(f"{name[:100]!r} is no entry-point name ({HOOK_NAME.pattern})")
        if len(set(value)) != len(value):
            raise ValueError("a hook is named twice")
        return value

    @model_validator(mode="after")
    def _lease_timing(self) -> SubscriberSettings:
        if self.writer_lease_ttl_s < 3 * self.writer_lease_renew_s:
            raise ValueError(
                "writer_lease_ttl_s must be at least 3 * writer_lease_renew_s, so a slow "
                "renewal does not lose the lease"
            )
        return self

    @field_validator("spark_driver_memory")
    @classmethod
    def _heap_spark_accepts(cls, value: str) -> str:
        unit = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[value[-1].lower()]
        if int(value[:-1]) * unit < SPARK_MIN_DRIVER_MEMORY:
            raise ValueError("at least 450m: Spark refuses to start with less")
        return value

    @field_validator("verify_keys", mode="before")
    @classmethod
    def _key_list(cls, value: object) -> object:
        if isinstance(value, str):
            return parse_key_list(value)
        return check_key_ids(value) if isinstance(value, Mapping) else value


def _blob_settings_from_env() -> BlobStoreSettings | None:
    """The blob store of SCD_BLOB_*, or None when none is configured."""
    if not any(name.startswith("SCD_BLOB_") for name in os.environ):
        return None
    return BlobStoreSettings()
