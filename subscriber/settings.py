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

    agent_name: str = Field(
        default="subscriber",
        min_length=1,
        description="this subscriber's agent name (queue name on the publisher)",
    )
    pub_agents: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["publish"],
        min_length=1,
        json_schema_extra={"doc_default": "`publish`"},
        description="Publisher agents whose packages this subscriber imports; others only advance "
        "the offset.",
    )
    store_path: str = Field(
        default=".scd/store",
        description="its Delta table: a path (or `file:///path`), `s3a://bucket/path` or "
        "`s3://bucket/path` (the same S3A file system); other schemes need "
        "`SINGLE_HOST_LEASE_DIR`",
    )
    agents_file: str | None = Field(
        default=None,
        description="a TOML file of `[[agent]]` tables: run several agents in this one daemon, "
        "each with its `name`, `store_path` and overrides of the per-agent settings "
        "above and below ([operations: several agents in one "
        "process](operations.md#several-agents-in-one-process)); unset: one agent, "
        "the one these settings describe",
    )
    reset: Literal["latest", "earliest"] = Field(
        default="latest",
        description="Where a brand-new store starts: Sling's default is the latest offset (new "
        "content only).",
    )
    accept_gap: bool = Field(
        default=False,
        description="Lag beyond retention (subscriber/bookkeeper/behind_log.py): continue past "
        "offsets the package topic deleted before this subscriber read them, once, at "
        "the offset where the process starts. Off: such a subscriber stops importing "
        "(state BEHIND_LOG) until an operator decides.",
    )
    editable: bool = Field(default=False, description="accept clear commands")
    max_retries: int = Field(
        default=-1,
        description="Sling's default -1: block and retry forever; >= 0 gives up after that many "
        "retries.",
    )
    staged_after: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        max_length=100,
        description="canary subscribers (editable ones): import a package only once each reported "
        "it on the status topic, hold one a canary failed for good ([operations: "
        "staged import](operations.md#staged-canary-import)); unset: not staged",
    )
    staged_wait_s: float = Field(
        default=300.0,
        gt=0,
        description="how long a package waits for the canaries before the wait is logged and "
        "counted (`scd_canary_wait_timeouts_total`); it then waits again, never "
        "giving the package up",
    )
    retry_initial_s: float = Field(
        default=5.0,
        gt=0,
        description="Back-off between attempts of a failing package: Sling's 5 s doubling up to "
        "15 min.",
    )
    retry_max_s: float = Field(
        default=900.0,
        gt=0,
        description="longest back-off between two attempts of a failing package",
    )
    announce_interval_s: float = Field(
        default=10.0,
        gt=0,
        description="Discovery announcement period (Sling: 10 s; the publisher's alive TTL is 30 "
        "s).",
    )
    batch_max: int = Field(
        default=2000,
        ge=1,
        description="Most packages per commit when behind: a poll takes what the journal has "
        "ready, up to this. A Delta commit has a fixed cost of about half a second "
        "here whatever its size, so large batches amortize it; 2,000 packages of ~5 "
        "KB are ~10 MB of rows on the driver.",
    )
    batch_max_bytes: int = Field(
        default=128 * 1024 * 1024,
        ge=1,
        description="Decoded bytes of packages held for one commit, and again for the batch read "
        "ahead while it commits: a batch ends once its packages reach this (a larger "
        "package goes alone).",
    )
    max_package_bytes: int = Field(
        default=MAX_DECODED_BYTES,
        ge=1,
        description="Largest package accepted, decoded: at least the publisher's "
        "SCD_PUBLISHER_MAX_PACKAGE_BYTES. A larger one is a permanent failure "
        "(REMOVED_FAILED) instead of a memory spike.",
    )
    poll_timeout_s: float = Field(
        default=0.5,
        gt=0,
        description="How long one poll waits for packages: bounds shutdown and command latency "
        "when idle.",
    )
    skip_store_every: int = Field(
        default=10,
        ge=1,
        description="Skipped (not-for-us) packages: store the offset at least every Nth skip "
        "(Sling: 10).",
    )
    purge_every_commits: int = Field(
        default=100,
        ge=1,
        description="Sent statuses and superseded offset rows are purged after this many commits.",
    )
    maintenance_enabled: bool = Field(
        default=True,
        description="Store maintenance in idle time (subscriber/maintenance/scheduler.py, "
        "[operations](operations.md#store-maintenance)): compaction, VACUUM of files "
        "removed longer ago than the retention (what a reader or a copy of the store "
        "in progress may still need), deletion of log entries older than the log "
        "retention (how far back time travel reaches). Fractions of an hour work "
        "(0.1: six minutes); at 0 VACUUM would delete the files of the import it runs "
        "beside.",
    )
    maintenance_retention_hours: float = Field(
        default=168.0,
        gt=0,
        description="how long a data file stays after a commit stopped using it (fractions work)",
    )
    maintenance_log_retention_hours: float = Field(
        default=24.0, gt=0, description="how far back the Delta log reaches"
    )
    maintenance_interval_s: float = Field(
        default=3600.0, gt=0, description="period of the interval steps (purge, compaction, VACUUM)"
    )
    maintenance_compact_min_files: int = Field(
        default=20, ge=2, description="small files that trigger a compaction after a purge"
    )
    maintenance_target_file_bytes: int = Field(
        default=128 * 1024,
        ge=1024,
        description="Compaction merges files below half this size into files of up to it. Larger "
        "files mean fewer of them, but a fold rewrites the whole file holding a "
        "version it deletes, and that copy stays on disk for the retention "
        "(docs/benchmarks.md#subscriber_longrun).",
    )
    maintenance_fold_growth: float = Field(
        default=0.5,
        gt=0,
        le=10,
        description="Replaced versions are folded out once the table grew by this share since the "
        "last fold: smaller means fewer replaced versions read and kept, larger fewer "
        "rewrites of the table (each kept on disk for the retention). "
        "subscriber/maintenance/scheduler.py.",
    )
    writer_lease_ttl_s: float = Field(
        default=12.0,
        gt=0,
        description="One writer per store (subscriber/writer/lease.py, [one writer per "
        "store](one-writer-per-store.md)): the writer renews its lease every renew_s; "
        "a standby takes over once the lease went unrenewed for ttl_s (at most ttl_s "
        "+ 2 * renew_s after the writer died). A shorter ttl means a faster takeover, "
        "and a writer stalled longer than ttl_s - renew_s (a long GC or I/O pause) "
        "steps down.",
    )
    writer_lease_renew_s: float = Field(
        default=2.0,
        gt=0,
        description="period at which the writer renews its lease (and a standby reads it)",
    )
    single_host_lease_dir: Path | None = Field(
        default=None,
        description="A store on a scheme where scd has no writer lease that every host sees "
        "(`gs://`, `abfss://`, `hdfs://`, any but `s3a://`, `s3://` and local paths) "
        "is refused at start (exit 2, saying why) unless this names a local "
        "directory: the operator vouches that every process writing the store runs on "
        "this one host, and its lease is a file there ([one writer per "
        "store](one-writer-per-store.md#store-schemes)).",
    )
    ready_caught_up: bool = Field(
        default=True,
        description="Readiness: ready once everything before the log's end as it was when the "
        "store opened is imported (what an autoscaler waits for); the rules below are "
        "Sling's, and the first rule to fire makes the subscriber ready",
    )
    ready_idle_s: float | None = Field(
        default=10.0,
        ge=0,
        description="Readiness (Sling's rules): ready once idle this long, or a package younger "
        "than the message age was imported, or a package failed more than "
        "ready_max_retries times, or ready_force_s after start at the latest. None "
        "turns a rule off.",
    )
    ready_max_message_age_s: float | None = Field(
        default=120.0,
        ge=0,
        description="ready once a package younger than this was imported (unset: rule off)",
    )
    ready_max_retries: int | None = Field(
        default=10,
        ge=0,
        description="ready once a package failed more often than this (unset: rule off)",
    )
    ready_force_s: float | None = Field(
        default=300.0,
        ge=0,
        description="ready this long after start whatever else (unset: rule off)",
    )
    http_host: str = Field(
        default="127.0.0.1",
        description="interface of the endpoint of `/health`, `/ready`, `/metrics` and the read "
        "API: loopback by default; `0.0.0.0` inside a container",
    )
    http_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="port of `/health`, `/ready`, `/metrics` and the read API (unset: no "
        "endpoint; 0: any free port)",
    )
    read_api: bool = Field(
        default=True,
        description="serve the read API (`/content`, `/binaries`) on that port ([read "
        "API](read-api.md))",
    )
    read_token: SecretStr | None = Field(
        default=None,
        description="bearer token every read must carry (unset: reads are open to whoever reaches "
        "the port)",
    )
    read_index_dir: Path | None = Field(
        default=None,
        description="where the read models keep their SQLite index (unset: a temporary directory, "
        "removed on stop)",
    )
    spark_master: str = Field(default="local[2]", description="Spark master of the import")
    spark_jars: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Jars for Delta (and hadoop-aws for s3a:// stores); empty: Spark resolves "
        "them by Maven coordinates. deploy/spark-jars.sh prefetches them for offline "
        "machines and builds scd's own jar (`scd-hadoop-localfs-1.jar`, from "
        "subscriber/jvm) into the same list. With that jar listed and a `local` "
        "master, local stores are written through scd's local filesystem, which sets "
        "file modes and reads links through Java instead of starting a `chmod` or "
        "`readlink` process for each file (Hadoop does that when its native library "
        "is missing, as it is in pyspark): small commits take about a third less time "
        "(docs/benchmarks.md#subscriber_bigstore).",
    )
    spark_jars_installed: bool = Field(
        default=False,
        description="The jars of `SCD_SUBSCRIBER_SPARK_JARS` are at the same paths on every "
        "executor's host (one image for the drivers and the executors, as in the "
        "compose cluster, or a single host, as `deploy/cluster.sh "
        "--spark-standalone`): they go on the driver's and the executors' class paths "
        "(`spark.driver.extraClassPath`, `spark.executor.extraClassPath`) instead of "
        "`spark.jars`, which makes each driver copy them to each of its executors "
        "when it starts: 558 MB for s3a's AWS bundle, about 10 s of an executor's "
        "start on an idle host and that much of the worker's disk per subscriber "
        "start. Leave it false when the executors' hosts do not have the jars.",
    )
    spark_shuffle_partitions: int = Field(
        default=2, ge=1, description="`spark.sql.shuffle.partitions` of the store's session"
    )
    spark_codegen: bool = Field(
        default=False,
        description="`true`: Spark generates and compiles Java for each query plan and expression "
        "(its default). `false`: it evaluates them without "
        "(`spark.sql.codegen.wholeStage=false`, "
        "`spark.sql.codegen.factoryMode=NO_CODEGEN`): the store's jobs are many and "
        "small, and compiling cost more CPU than it saved (commits and folds of a "
        "small store took 18-40 % less time without, docs/benchmarks.md#engines). "
        "Large one-off scans "
        "run faster with it.",
    )
    spark_class_archive: Path | None = Field(
        default=None,
        description="A class-data archive of the Spark JVM, written by `scd spark-archive PATH` "
        "(about 90 s, once per host or image): the driver maps the classes Spark and "
        "Delta load instead of loading them again, and a session's start plus its "
        "first Delta commits take about a quarter less time and CPU. Valid for the "
        "JDK, Spark jars folder and driver class path jars that built it (fingerprint "
        "in `PATH.fingerprint`); one built for another install is logged and not "
        "mapped, a corrupt one is ignored, a missing one is logged; the JVM then "
        "starts without.",
    )
    spark_driver_memory: str = Field(
        default="512m",
        pattern=r"^[1-9][0-9]{0,5}[kKmMgG]$",
        description="Heap of the local Spark JVM (spark.driver.memory, a JVM size such as 512m or "
        "2g; Spark needs 450m at least). The subscriber's memory is that heap plus "
        "~340 MiB the JVM needs besides it, plus ~125 MiB of Python: 512m keeps it "
        "under 1 GiB, a million-node store included "
        "(docs/benchmarks.md#subscriber_bigstore).",
    )
    concurrent_commits: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        json_schema_extra={"doc_default": "one per CPU core"},
        description="How many of a daemon's agents open or commit their stores at once (1-1024; a "
        "setting of the process, not of one agent). The others wait, agents that are "
        "not ready yet (at start, or added by SIGHUP) ahead of those that serve, "
        "otherwise in turn. A commit is mostly CPU on the shared driver: fifty at "
        "once on 2 cores took 50-110 s each, and a new agent was one of fifty "
        "([operations](operations.md#several-agents-in-one-process)). An agent whose "
        "store hangs stops counting after holding its slot for 60 s: it delays the "
        "others by that much once, never for good.",
    )
    fold_worker: bool = Field(
        default=True,
        description="Folds and compactions are computed, and checkpoints written, by a process of "
        "the daemon's own at the lowest CPU priority (nice 19), so that they do not "
        "take the imports' cores or their JVM "
        "([operations](operations.md#store-maintenance)); the store commits what a "
        "fold or compaction wrote. It has its own local Spark JVM, started by a step "
        "and ended after 2 minutes without one: about 1 GiB more meanwhile (its "
        "Python 108 MiB, its JVM 934 MiB at peak with the 512m heap). `false`: folds, "
        "compactions and checkpoints run in the store's own session, beside the "
        "imports. A setting of the process; with a Spark cluster (`SPARK_MASTER` not "
        "`local`) the fold's tasks run on the executors and there is no worker.",
    )

    import_hooks: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        max_length=20,
        description="import hooks to run, in order: names of entry points in the group "
        "`scd.import_hooks` (built in: `invalidate`); a name no installed package "
        "registers stops the start ([import hooks](import-hooks.md))",
    )
    import_hook_timeout_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="how long an import waits for one hook call (0 < s ≤ 3600); a call that "
        "overruns is a transient import failure, and further calls of that hook fail "
        "at once until it returns ([import hooks](import-hooks.md#a-hook-that-hangs))",
    )

    verify_keys: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        description="Signed records: public keys accepted for package and command records, as "
        '"key_id=/path/key.pub,key_id2=base64:<raw 32 bytes>" (a table in TOML); '
        "several during a key rotation. Empty: records are not checked. Loaded by "
        "journal.wire.signing.verifier_from_settings.",
    )

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
