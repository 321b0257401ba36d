"""Subscriber subcommands of the scd CLI: ``scd subscriber`` runs the daemon;
``scd content ls|cat|export`` read a subscriber's content store without a JVM
(subscriber.tree_reader); ``scd content maintain`` runs its maintenance in Spark."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from blobstore.factory import open_blob_store
from journal.content.package import FILE_DATA
from runtime.progress import ProgressBar
from subscriber.content import BlobSource, NodeSource, list_tree, open_binary, read_node
from subscriber.export import export_tree
from subscriber.reads.client import ReadApiSource
from subscriber.settings import SubscriberSettings
from subscriber.tree_reader import StoreTree, open_tree, storage_options

if TYPE_CHECKING:
    from subscriber.store.delta import DeltaStore


# The read token of the subscriber read (--url): the variable the daemon reads its own from.
READ_TOKEN_ENV = "SCD_SUBSCRIBER_READ_TOKEN"


def _settings(args: argparse.Namespace) -> SubscriberSettings:
    overrides: dict[str, Any] = {}
    if getattr(args, "store", None):
        overrides["store_path"] = args.store
    if getattr(args, "accept_gap", False):
        overrides["accept_gap"] = True
    return SubscriberSettings(**overrides)


def cmd_subscriber(args: argparse.Namespace) -> int:
    from subscriber.daemon import run

    return run(_settings(args))


def _open_store(settings: SubscriberSettings, stack: ExitStack) -> DeltaStore:
    # Spark is imported by the one command that needs it: the reads start no JVM and stay fast.
    from subscriber.spark import spark_session
    from subscriber.store.delta import DeltaStore

    spark = spark_session(settings, "scd-content")
    stack.callback(spark.stop)
    store = DeltaStore(spark, settings.store_path)
    if not store.exists():
        raise SystemExit(f"scd: no content store at {settings.store_path}")
    return store


def _open_tree(settings: SubscriberSettings) -> StoreTree:
    """The current tree of the settings' store, at its latest version."""
    location = settings.store_path
    return open_tree(location, storage_options(location, settings.blobstore))


def cmd_spark_archive(args: argparse.Namespace) -> int:
    from subscriber.spark_archive import build

    settings = _settings(args)
    target = Path(args.path) if args.path else settings.spark_class_archive
    if target is None:
        raise SystemExit("scd: give the archive's path (or set SCD_SUBSCRIBER_SPARK_CLASS_ARCHIVE)")
    with _jvm_output_to_stderr():
        seconds = build(settings, target)
    print(f"Spark class archive written to {target} in {seconds:.1f} s")
    return 0


def _nodes(
    args: argparse.Namespace, stack: ExitStack
) -> tuple[NodeSource, SubscriberSettings | None]:
    """The content read: a running subscriber's read API (``--url``, no settings needed) or the
    store the settings name, and those settings."""
    if args.url:
        token = os.environ.get(READ_TOKEN_ENV) or None
        return stack.enter_context(ReadApiSource(args.url, token, args.agent)), None
    settings = _settings(args)
    return _open_tree(settings), settings


def _blobs(
    nodes: NodeSource, settings: SubscriberSettings | None, stack: ExitStack
) -> BlobSource | None:
    """Where binaries are read: the read API that serves the nodes, or the blob store."""
    if isinstance(nodes, ReadApiSource):
        return nodes
    if settings is None or settings.blobstore is None:
        return None
    return stack.enter_context(open_blob_store(settings.blobstore))


def cmd_ls(args: argparse.Namespace) -> int:
    with ExitStack() as stack:
        nodes, _ = _nodes(args, stack)
        entries = list_tree(nodes, args.root, deep=not args.shallow)
    if args.json:
        print(json.dumps([e.__dict__ for e in entries], indent=2))
        return 0
    for e in entries:
        size = f"{e.binary_bytes} B" if e.binaries else ""
        print(f"{e.path}\t{e.node_type or '-'}\t{e.properties} props\t{size}")
    return 0


def cmd_cat(args: argparse.Namespace) -> int:
    with ExitStack() as stack:
        nodes, settings = _nodes(args, stack)
        if args.properties:
            print(json.dumps(read_node(nodes, args.path), indent=2))
            return 0
        with open_binary(nodes, _blobs(nodes, settings, stack), args.path, args.property) as stream:
            shutil.copyfileobj(stream, sys.stdout.buffer)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    with ExitStack() as stack:
        nodes, settings = _nodes(args, stack)
        report = export_tree(
            nodes,
            _blobs(nodes, settings, stack),
            args.root,
            Path(args.target),
            progress=ProgressBar("export"),
        )
    print(
        f"exported {report.nodes} nodes to {report.target_dir}: {report.files} files "
        f"({report.file_bytes} bytes), {report.directories} directories"
    )
    return 0


@contextmanager
def _jvm_output_to_stderr() -> Iterator[None]:
    """The Spark JVM started in here writes to stderr (Delta prints VACUUM's counts to the
    process's stdout), so stdout carries only the command's own output."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def cmd_maintain(args: argparse.Namespace) -> int:
    from subscriber.maintenance.scheduler import Maintenance, MaintenancePolicy

    if args.url:
        raise SystemExit("scd: content maintain runs on the store itself, not through --url")
    settings = _settings(args)
    policy = MaintenancePolicy.from_settings(settings)
    if args.retention_hours is not None:
        policy = dataclasses.replace(policy, retention_s=args.retention_hours * 3600)
    with ExitStack() as stack:
        with _jvm_output_to_stderr():
            store = _open_store(settings, stack)
        store.open()
        reports = Maintenance("scd-content", store, policy).run_all()
    if args.json:
        print(json.dumps([r.as_dict() for r in reports], indent=2))
        return 0
    print(f"{'step':<11}{'seconds':>8}  {'files':>13}  {'deleted':>7}  {'bytes reclaimed':>15}")
    for r in reports:
        files = f"{r.files_before} -> {r.files_after}" if r.files_before is not None else "-"
        print(
            f"{r.step:<11}{r.seconds:>8.2f}  {files:>13}  {r.files_deleted:>7}  "
            f"{r.bytes_reclaimed:>15}"
        )
    return 0


def register(sub: Any) -> None:
    daemon = sub.add_parser("subscriber", help="run a subscriber agent until SIGTERM")
    daemon.add_argument(
        "--accept-gap",
        action="store_true",
        help="continue past packages the package topic deleted before this subscriber read "
        "them (BEHIND_LOG), once, where it starts; the store records the gap",
    )
    daemon.set_defaults(func=cmd_subscriber)

    archive = sub.add_parser(
        "spark-archive",
        help="write a class-data archive of the subscriber's Spark JVM, which then starts faster "
        "(SCD_SUBSCRIBER_SPARK_CLASS_ARCHIVE)",
    )
    archive.add_argument(
        "path", nargs="?", help="where (default: SCD_SUBSCRIBER_SPARK_CLASS_ARCHIVE)"
    )
    archive.set_defaults(func=cmd_spark_archive)

    content = sub.add_parser(
        "content", help="read a subscriber's content: its store, or its read API (--url)"
    )
    content.add_argument("--store", help="content store path (default: SCD_SUBSCRIBER_STORE_PATH)")
    content.add_argument(
        "--url",
        help="read through a running subscriber's read API at this URL instead (its read "
        f"token, when it has one, from {READ_TOKEN_ENV})",
    )
    content.add_argument(
        "--agent", help="with --url: the agent, when the daemon there serves several"
    )
    actions = content.add_subparsers(dest="action", required=True)
    ls = actions.add_parser("ls", help="list a subtree")
    ls.add_argument("root", nargs="?", default="/")
    ls.add_argument("--shallow", action="store_true", help="the node and its children only")
    ls.add_argument("--json", action="store_true", help="JSON output")
    ls.set_defaults(func=cmd_ls)
    cat = actions.add_parser("cat", help="write a node's binary (or its properties) to stdout")
    cat.add_argument("path")
    cat.add_argument("--property", default=FILE_DATA, help=f"binary property (default {FILE_DATA})")
    cat.add_argument("--properties", action="store_true", help="print the node's properties")
    cat.set_defaults(func=cmd_cat)
    export = actions.add_parser("export", help="reproduce a subtree as files in a directory")
    export.add_argument("root")
    export.add_argument("target")
    export.set_defaults(func=cmd_export)
    maintain = actions.add_parser(
        "maintain",
        help="run every store maintenance step now (docs/operations.md: Store maintenance)",
    )
    maintain.add_argument("--store", default=argparse.SUPPRESS, help="content store path")
    maintain.add_argument(
        "--retention-hours",
        type=float,
        help="set the store's retention of removed files to this (a table property; default: "
        "SCD_SUBSCRIBER_MAINTENANCE_RETENTION_HOURS; fractions work) and delete the files "
        "removed longer ago; 0 deletes every file the current version does not read: only with "
        "no subscriber running on the store and no reader or copy in progress",
    )
    maintain.add_argument("--json", action="store_true", help="JSON output")
    maintain.set_defaults(func=cmd_maintain)
