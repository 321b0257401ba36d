"""A store of a million nodes: open time, memory, and the commit time of small batches.

* ``generate``: writes a site-like store of ``--pages`` pages (10 nodes each, under 10 languages
  x 50 sections x 20 categories: paths of 6 to 9 levels, 70 to 100 characters) plus the folders,
  directly with Spark in the store's row schema, then an offset row and a checkpoint as the
  subscriber leaves them. ``--layout sorted`` range-partitions the rows by path (what a path
  ordered load or a clustering OPTIMIZE leaves: each file holds one path range, so file
  statistics skip the others); ``random`` spreads paths over every file (a store grown from
  packages in arrival order and bin-packed).
* ``measure``: in a fresh process, opens the store (timed; Python driver RSS and the Spark JVM's
  RSS after it), then commits, alternating, batches of each kind: one package with a new page,
  an update of an existing page, a deep delete of a page (10 nodes) and of a category (~100
  nodes), and ten packages of new pages, of updates, and of deletes. Per kind the commit time,
  and its ratio to the new pages' of the same size. Then the fold of the scopes the commits
  left (timed), peak RSS, and ``scd content ls`` of a category (to /dev/null: time and peak RSS
  of that process).
* ``compare``: commit times of one-package appends and updates on a small store (200 pages),
  for two source trees side by side (``--before DIR``: another checkout, such as a store layout
  to compare with; the current tree is ``after``), each run in its own process, alternating.
* ``paced``: publish->imported latency at a steady rate (``--rate``, 10 packages/s) on a copy of
  the store, with and without store maintenance, for the current tree and (``--before DIR``)
  another, each variant in its own process. Packages (new pages and updates, alternating) fall
  due at the rate; the loop commits every package due in one batch, as the import loop does,
  and between commits, when nothing is due, calls ``Maintenance.step`` as the import loop does
  when a poll finds nothing (maintenance set to run all the time: a fold whenever the table
  grew at all, compaction and VACUUM every ``--interval-s``). A package's latency is from the
  moment it fell due to the end of the commit holding it (no journal: the store's part).
* ``commit-cost``: the cost of one small commit (a new page) on a copy of the store, with scd's
  local filesystem (subscriber/jvm) and with Hadoop's, each in its own process, alternating:
  wall time per commit, and CPU per commit of Python, of the Spark JVM, and of the processes
  the JVM started (Hadoop's shell commands), from /proc.

    .venv/bin/python -m bench.subscriber_bigstore generate --store /tmp/big --pages 100000
    .venv/bin/python -m bench.subscriber_bigstore measure --store /tmp/big
    .venv/bin/python -m bench.subscriber_bigstore compare --before /tmp/scd-before
    .venv/bin/python -m bench.subscriber_bigstore paced --store /tmp/big --before /tmp/scd-before
    .venv/bin/python -m bench.subscriber_bigstore commit-cost --store /tmp/small300

Everything prints JSON on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import inspect
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.local import LOOPBACK_DRIVER, spark_jars
from journal.content.package import NODE_TYPE, ContentPackage, FilterRoot, Node
from journal.wire import messages as m
from runtime.stats import percentile
from subscriber import spark as subscriber_spark
from subscriber.maintenance.scheduler import MaintenancePolicy
from subscriber.settings import SubscriberSettings
from subscriber.spark import spark_session
from subscriber.store.changes import Unit
from subscriber.store.delta import DeltaStore

SPARK_MASTER = "local[2]"
LANGUAGES = ["en", "de", "fr", "it", "es", "nl", "pt", "ja", "zh", "ko"]
SECTIONS = 50
CATEGORIES = 20
PAGE_NODES = [
    "",
    "/jcr:content",
    "/jcr:content/par",
    "/jcr:content/par/title",
    "/jcr:content/par/text-1",
    "/jcr:content/par/text-2",
    "/jcr:content/par/text-3",
    "/jcr:content/par/image",
    "/jcr:content/par/teaser",
    "/jcr:content/image",
]
# Rows per data file of a generated store: about the store's compaction target (256 KiB).
ROWS_PER_FILE = 2000
PUB_AGENT = "publish"
REPO_DIR = Path(__file__).resolve().parent.parent


def session(app: str, *, local_fs: bool = True) -> Any:
    """``local_fs``: with scd's local filesystem (its jar among the session's), or Hadoop's."""
    # A tree from before scd's filesystem (``--before``) has no prefix: every jar is kept.
    prefix = getattr(subscriber_spark, "LOCAL_FS_JAR_PREFIX", None)
    jars = [j for j in spark_jars() if local_fs or not (prefix and Path(j).name.startswith(prefix))]
    probe = SubscriberSettings(spark_master=SPARK_MASTER, spark_jars=jars)
    return spark_session(probe, app, extra=LOOPBACK_DRIVER)


# ---------------------------------------------------------------------------- the site's tree
def category_path(page: int) -> str:
    lang = LANGUAGES[(page // (SECTIONS * CATEGORIES * 10)) % len(LANGUAGES)]
    section = (page // (CATEGORIES * 10)) % SECTIONS
    category = (page // 10) % CATEGORIES
    return f"/content/site/{lang}/products-and-solutions-{section:02d}/category-{category:02d}"


def page_path(page: int) -> str:
    return f"{category_path(page)}/page-{page:06d}-article"


def prop(vtype: str, values: str) -> str:
    """A property of the store's row schema, as a Spark SQL expression."""
    return f"named_struct('type', '{vtype}', 'multi', false, 'values', array({values}))"


def generate(args: argparse.Namespace) -> dict[str, Any]:
    spark = session("scd-bench-bigstore-generate")
    store = DeltaStore(spark, args.store)
    started = time.perf_counter()
    store.open()  # creates the table (schema, properties, instance row)
    pages = args.pages
    langs = "array(" + ", ".join(f"'{x}'" for x in LANGUAGES) + ")"
    suffixes = "array(" + ", ".join(f"'{s}'" for s in PAGE_NODES) + ")"
    per_lang = SECTIONS * CATEGORIES * 10
    category = (
        f"concat('/content/site/', element_at({langs}, cast(p div {per_lang} % {len(LANGUAGES)}"
        f" as int) + 1), '/products-and-solutions-', lpad(cast(p div {CATEGORIES * 10} % "
        f"{SECTIONS} as string), 2, '0'), '/category-', lpad(cast(p div 10 % {CATEGORIES} as "
        "string), 2, '0'))"
    )
    page = f"concat({category}, '/page-', lpad(cast(p as string), 6, '0'), '-article')"
    nodes = spark.range(pages * len(PAGE_NODES)).selectExpr(
        f"id div {len(PAGE_NODES)} as p", f"cast(id % {len(PAGE_NODES)} as int) as n"
    )
    nodes = nodes.selectExpr(
        "p",
        "n",
        f"concat({page}, element_at({suffixes}, n + 1)) as path",
    )
    text = "concat(sha2(cast(p * 10 + n as string), 256), sha2(cast(p as string), 512))"
    base_props = {
        "jcr:primaryType": prop("string", "if(n = 0, 'cq:Page', 'nt:unstructured')"),
        "jcr:title": prop("string", "concat('Article ', p, ' part ', n)"),
        "jcr:lastModified": prop("date", "'2026-01-01T00:00:00.000+00:00'"),
        "sling:resourceType": prop("string", "'site/components/text'"),
    }
    base = "map(" + ", ".join(f"'{k}', {v}" for k, v in base_props.items()) + ")"
    properties = (
        f"CASE WHEN n BETWEEN 4 AND 8 THEN map_concat({base}, map('text', "
        f"{prop('string', text)})) ELSE {base} END"
    )
    binaries = (
        "CASE WHEN n IN (7, 9) THEN map('file', named_struct('blob_key', concat('blobs/', "
        "sha2(path, 256)), 'size', cast(40000 + p % 9000 as bigint), 'sha256', sha2(path, 256), "
        "'content_type', 'image/jpeg', 'data', cast(null as binary))) END"
    )
    node_rows = nodes.selectExpr(
        "'node' as kind",
        "path",
        "substring_index(path, '/', size(split(path, '/')) - 1) as parent",
        "substring_index(path, '/', -1) as name",
        f"{properties} as properties",
        f"{binaries} as binaries",
        "p as offset",
        "concat('pkg-', p) as pkg_id",
        f"'{PUB_AGENT}' as pub_agent",
        "cast(null as string) as status",
        "cast(null as string) as info",
        "cast(1767225600000 + p as bigint) as updated_ms",
    )
    folders = sorted(
        {category_path(p) for p in range(0, pages, 10)}
        | {category_path(p).rsplit("/", 1)[0] for p in range(0, pages, 10)}
        | {category_path(p).rsplit("/", 2)[0] for p in range(0, pages, 10)}
        | {"/content/site", "/content"}
    )
    folder_rows = spark.createDataFrame([(f,) for f in folders], "path string").selectExpr(
        "'node' as kind",
        "path",
        "if(path = '/content', '/', substring_index(path, '/', size(split(path, '/')) - 1))",
        "substring_index(path, '/', -1) as name",
        "map('jcr:primaryType', " + prop("string", "'sling:Folder'") + ")",
        "cast(null as map<string, struct<blob_key: string, size: bigint, sha256: string, "
        "content_type: string, data: binary>>)",
        "cast(0 as bigint)",
        "'pkg-folders'",
        f"'{PUB_AGENT}'",
        "cast(null as string)",
        "cast(null as string)",
        "cast(1767225600000 as bigint)",
    )
    rows = node_rows.unionByName(folder_rows.toDF(*node_rows.columns))
    table = spark.read.format("delta").load(args.store)
    rows = rows.select(*(rows[c].cast(table.schema[c].dataType).alias(c) for c in table.columns))
    total = pages * len(PAGE_NODES) + len(folders)
    files = max(1, total // ROWS_PER_FILE)
    if args.layout == "sorted":
        rows = rows.repartitionByRange(files, "path").sortWithinPartitions("path")
    else:
        rows = rows.repartition(files)
    rows.write.format("delta").mode("append").save(args.store)
    store.record_offset(pages, "bench: generated store")
    store.checkpoint()
    elapsed = time.perf_counter() - started
    stats = store.file_stats()
    spark.stop()
    return {
        "store": args.store,
        "layout": args.layout,
        "nodes": total,
        "pages": pages,
        "files": stats.files,
        "bytes": stats.bytes,
        "generate_s": round(elapsed, 1),
    }


# ---------------------------------------------------------------------------- packages
def page_package(pkg_id: str, page: int, version: int, path: str | None = None) -> ContentPackage:
    base = path or page_path(page)
    nodes = []
    for suffix in PAGE_NODES:
        node = Node(path=base + suffix)
        node.properties[NODE_TYPE].string_value = "cq:Page" if not suffix else "nt:unstructured"
        node.properties["jcr:title"].string_value = f"Article {page} v{version}"
        node.properties["text"].string_value = os.urandom(96).hex()
        nodes.append(node)
    return ContentPackage(
        package_id=pkg_id,
        req_type=m.ReqType.ADD,
        roots=[FilterRoot(path=base, deep=True)],
        nodes=nodes,
    )


def delete_package(pkg_id: str, root: str) -> ContentPackage:
    return ContentPackage(
        package_id=pkg_id, req_type=m.ReqType.DELETE, roots=[FilterRoot(path=root, deep=True)]
    )


def unit(offset: int, package: ContentPackage) -> Unit:
    return Unit(offset, PUB_AGENT, package.package_id, package.req_type, package)


def timed_commit(store: DeltaStore, units: list[Unit]) -> float:
    """Seconds from the first unit added to the end of the store's commit."""
    started = time.perf_counter()
    changes = store.begin()
    for u in units:
        changes.add(u)
    store.commit(changes)
    return time.perf_counter() - started


def rss_mib(pid: int | str = "self") -> dict[str, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = round(int(value.split()[0]) / 1024, 1)
    return {"rss_mib": fields["VmRSS"], "peak_rss_mib": fields["VmHWM"]}


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "p50_s": round(statistics.median(ordered), 3),
        "min_s": round(ordered[0], 3),
        "max_s": round(ordered[-1], 3),
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    spark = session("scd-bench-bigstore")
    session_s = time.perf_counter() - started
    jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    store = DeltaStore(spark, args.store)
    started = time.perf_counter()
    state = store.open()
    open_s = time.perf_counter() - started
    result: dict[str, Any] = {
        "store": args.store,
        "files": store.file_stats().files,
        "session_s": round(session_s, 1),
        "open_s": round(open_s, 2),
        "after_open": {"driver": rss_mib(), "jvm": rss_mib(jvm_pid)},
    }
    assert state.offset is not None
    offset = state.offset + 1
    pages = args.pages
    rng = random.Random(5)
    times: dict[str, list[float]] = {}
    # Page numbers not in the store yet: above its offset (earlier runs made new pages below it).
    fresh = iter(range(offset, 10 * offset))

    def pages_of(count: int, kind: str, first: int) -> list[Unit]:
        def package(k: int) -> ContentPackage:
            pkg_id = f"{kind}-{first + k}"
            if kind == "new":
                return page_package(pkg_id, next(fresh), 0)
            if kind == "update":
                return page_package(pkg_id, rng.randrange(pages), first + k + 1)
            return delete_package(pkg_id, page_path(rng.randrange(pages)))

        return [unit(first + k, package(k)) for k in range(count)]

    kinds: dict[str, Callable[[int], list[Unit]]] = {
        "new_page": lambda first: pages_of(1, "new", first),
        "update_page": lambda first: pages_of(1, "update", first),
        "delete_page": lambda first: pages_of(1, "delete", first),
        "delete_category": lambda first: [
            unit(first, delete_package(f"delc-{first}", category_path(rng.randrange(pages))))
        ],
        "new_10_pages": lambda first: pages_of(10, "new", first),
        "update_10_pages": lambda first: pages_of(10, "update", first),
        "delete_10_pages": lambda first: pages_of(10, "delete", first),
    }
    for _ in range(args.rounds):
        for kind, build in kinds.items():
            units = build(offset)
            offset = units[-1].offset + 1
            times.setdefault(kind, []).append(timed_commit(store, units))
    medians = {kind: statistics.median(runs) for kind, runs in times.items()}
    result["commits"] = {
        kind: {
            **summary(runs),
            "ratio_p50_to_new": round(
                medians[kind] / medians["new_10_pages" if "10" in kind else "new_page"], 2
            ),
        }
        for kind, runs in times.items()
    }
    assert store.state is not None
    scopes = store.state.scopes
    started = time.perf_counter()
    while store.state.scopes:
        store.fold(MaintenancePolicy().fold_max_scopes)
    result["fold"] = {"scopes": scopes, "seconds": round(time.perf_counter() - started, 2)}
    result["after_commits"] = {"driver": rss_mib(), "jvm": rss_mib(jvm_pid)}
    result["driver_maxrss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    spark.stop()
    result["ls"] = {"category": scd_ls(args.store, category_path(0))}
    return result


def scd_ls(store: str, root: str) -> dict[str, Any]:
    """``scd content ls`` in its own process, output to /dev/null: time and peak RSS."""
    env = {
        **os.environ,
        "SCD_SUBSCRIBER_STORE_PATH": store,
        "SCD_SUBSCRIBER_SPARK_JARS": ",".join(spark_jars()),
    }
    script = (
        "import resource, sys, time; started = time.perf_counter(); "
        "from scd.cli import main; "
        f"code = main(['content', 'ls', {root!r}]); "
        "print(time.perf_counter() - started, "
        "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)"
    )
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    try:
        inner_s, maxrss = last.split()
        return {
            "exit": done.returncode,
            "process_s": round(elapsed, 1),
            "command_s": round(float(inner_s), 1),
            "driver_peak_rss_mib": round(int(maxrss) / 1024),
        }
    except ValueError:
        return {"exit": done.returncode, "process_s": round(elapsed, 1), "stderr": last[-500:]}


# ---------------------------------------------------------------------------- small store
SMALL_PAGES = 200


def small(args: argparse.Namespace) -> dict[str, Any]:
    """One variant on a fresh small store: one-package appends and updates, alternating."""
    spark = session("scd-bench-bigstore-small")
    with tempfile.TemporaryDirectory(prefix="scd-small-") as work:
        store = DeltaStore(spark, str(Path(work) / "store"))
        store.open()
        timed_commit(store, [unit(0, page_package("pre", 0, 0, "/content/site/pre"))])
        preload = [unit(1 + p, page_package(f"pre-{p}", p, 0)) for p in range(SMALL_PAGES)]
        timed_commit(store, preload)
        offset = SMALL_PAGES + 1
        rng = random.Random(args.seed)
        appends: list[float] = []
        updates: list[float] = []
        for i in range(args.commits + 2):  # the first two warm up
            new = timed_commit(store, [unit(offset, page_package(f"a{i}", 10_000 + i, 0))])
            upd = timed_commit(
                store, [unit(offset + 1, page_package(f"u{i}", rng.randrange(SMALL_PAGES), i))]
            )
            offset += 2
            if i >= 2:
                appends.append(new)
                updates.append(upd)
    spark.stop()
    return {"append": appends, "update": updates}


def tree_env(tree: str) -> dict[str, str]:
    """The environment of a run against the source tree ``tree``: its modules first, then this
    tree's (for the bench package itself); SCD_BENCH_TREE names it for scripts of older trees."""
    path = os.pathsep.join(dict.fromkeys([tree, str(REPO_DIR)]))
    return {**os.environ, "PYTHONPATH": path, "SCD_BENCH_TREE": tree}


def compare(args: argparse.Namespace) -> dict[str, Any]:
    trees = {"before": str(Path(args.before).resolve()), "after": str(REPO_DIR)}
    runs: dict[str, dict[str, list[float]]] = {n: {"append": [], "update": []} for n in trees}
    order = list(trees)
    for r in range(args.runs):
        for name in order if r % 2 == 0 else order[::-1]:
            script = str(Path(trees[name]) / "bench" / "subscriber_bigstore.py")
            if not Path(script).exists():  # the other tree has no copy of this script
                script = str(Path(__file__).resolve())
            out = subprocess.run(
                [sys.executable, script, "small", "--commits", str(args.commits), "--seed", str(r)],
                env=tree_env(trees[name]),
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            found = json.loads(out)
            for kind in ("append", "update"):
                runs[name][kind].extend(found[kind])
            print(json.dumps({"run": r, "tree": name, **found}), file=sys.stderr, flush=True)
    return {
        "pages": SMALL_PAGES,
        "runs": args.runs,
        "commits_per_run": args.commits,
        "trees": trees,
        "result": {
            name: {kind: summary(values) for kind, values in kinds.items()}
            for name, kinds in runs.items()
        },
    }


# ---------------------------------------------------------------------------- paced imports
# with: maintenance, the fold computed in the store's session (beside the imports, on their
# cores); with-worker: the fold computed by the fold worker (a process at nice 19).
PACED_VARIANTS = ("without", "with", "with-worker")


# The store's maintenance steps whose runs the paced timeline records.
TIMED_STEPS = ("purge", "fold", "checkpoint", "compact", "vacuum", "set_retention")


class StepClock:
    """The intervals (start, end) of each maintenance step the store ran, per step, by
    wrapping the store's methods: what a slow package's commit ran beside."""

    def __init__(self, store: DeltaStore) -> None:
        self.runs: dict[str, list[tuple[float, float]]] = {}
        self._lock = threading.Lock()
        for name in TIMED_STEPS:
            method = getattr(store, name, None)
            if method is not None:
                setattr(store, name, self._timed(name, method))

    def _timed(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                with self._lock:
                    self.runs.setdefault(name, []).append((started, time.perf_counter()))

        return timed

    def beside(self, start: float, end: float) -> list[str]:
        """The steps that ran at some moment of [start, end]."""
        with self._lock:
            return sorted(
                name
                for name, runs in self.runs.items()
                if any(a <= end and b >= start for a, b in runs)
            )


def slow_packages(
    packages: list[tuple[float, float]], clock: StepClock | None, p50_s: float
) -> dict[str, Any]:
    """The packages slower than twice the median (``packages``: when each fell due, when its
    commit ended), by the steps that ran while they waited; and the p99 of those beside none."""
    by_steps: dict[str, int] = {}
    clear: list[float] = []
    for due, ended in packages:
        steps = clock.beside(due, ended) if clock is not None else []
        if not steps:
            clear.append(ended - due)
        if ended - due > 2 * p50_s:
            key = "+".join(steps) or "none"
            by_steps[key] = by_steps.get(key, 0) + 1
    return {
        "over_2x_p50_by_steps_beside": dict(sorted(by_steps.items(), key=lambda kv: -kv[1])),
        "p99_s_beside_no_step": round(percentile(clear, 99), 3) if clear else None,
        "packages_beside_no_step": len(clear),
    }


def paced_loop(
    store: DeltaStore, maintenance: Any, args: argparse.Namespace, offset: int, pages: int
) -> tuple[list[tuple[float, float]], int]:
    """Packages falling due at ``args.rate`` for ``args.seconds``, committed as the import
    loop would; when each fell due and when its commit ended, and how many maintenance steps
    failed in this thread."""
    rng = random.Random(args.seed)
    fresh = iter(range(10 * offset, 20 * offset))
    packages: list[tuple[float, float]] = []
    failures = 0
    # After each commit: what the import loop starts then (this tree: only steps of the
    # maintenance thread), or, for a tree without that, a step as between two batches.
    between = None
    if maintenance is not None:
        if "inline" in inspect.signature(maintenance.step).parameters:
            between = functools.partial(maintenance.step, inline=False)
        else:
            between = maintenance.step

    def maintain(step: Callable[[], object]) -> int:
        try:
            step()
        except Exception as exc:  # the import loop logs it and goes on
            print(f"maintenance step failed: {exc}", file=sys.stderr)
            return 1
        return 0

    count = int(args.rate * args.seconds)
    started = time.perf_counter()
    due_at = [started + i / args.rate for i in range(count)]
    done = 0
    while done < count:
        now = time.perf_counter()
        due = [i for i in range(done, count) if due_at[i] <= now]
        if not due:
            if maintenance is not None:
                failures += maintain(maintenance.step)
            time.sleep(max(0.0, min(0.01, due_at[done] - time.perf_counter())))
            continue
        units = []
        for i in due:
            kind = "new" if i % 2 == 0 else "update"
            page = next(fresh) if kind == "new" else rng.randrange(pages)
            units.append(unit(offset, page_package(f"{kind}-{offset}", page, i)))
            offset += 1
        timed_commit(store, units)
        ended = time.perf_counter()
        packages.extend((due_at[i], ended) for i in due)
        done = due[-1] + 1
        if maintenance is not None and between is not None:
            maintenance.commits_since_purge += 1
            failures += maintain(between)
    return packages, failures


@contextlib.contextmanager
def warm_copy(spark: Any, args: argparse.Namespace) -> Iterator[tuple[DeltaStore, int]]:
    """A copy of ``args.store`` (in ``args.work_dir``), open, after ``args.warmup`` commits of
    a new page (JIT, Delta's caches: not counted); the store and its next offset."""
    with (
        contextlib.ExitStack() as stack,
        tempfile.TemporaryDirectory(prefix="scd-bench-", dir=args.work_dir) as work,
    ):
        location = str(Path(work) / "store")
        shutil.copytree(args.store, location)
        worker = None
        if args.variant == "with-worker":
            from subscriber.maintenance.fold_worker import FoldWorker

            worker = stack.enter_context(FoldWorker.of(spark))
        store = DeltaStore(spark, location, worker)
        state = store.open()
        assert state.offset is not None
        if worker is not None:
            # A running subscriber's worker is warm: its JVM started and a fold ran (JIT).
            # This fold is not committed (its files are left for VACUUM).
            worker.plan(location, 200)
        offset = state.offset + 1
        for _ in range(args.warmup):
            timed_commit(store, [unit(offset, page_package(f"w{offset}", 20 * offset, 0))])
            offset += 1
        yield store, offset


def paced_run(args: argparse.Namespace) -> dict[str, Any]:
    """One variant, in this process (the tree first on PYTHONPATH) on a copy of the store."""
    from subscriber.maintenance.scheduler import Maintenance

    spark = session("scd-bench-bigstore-paced")
    with warm_copy(spark, args) as (store, offset):
        pages = args.pages
        maintenance = None
        clock = None
        if args.variant != "without":
            clock = StepClock(store)
            policy = MaintenancePolicy(
                retention_s=args.retention_s,
                log_retention_s=3600.0,
                interval_s=args.interval_s,
                fold_min_scopes=1,
                fold_growth=0.001,
            )
            maintenance = Maintenance("bench", store, policy)
        count = int(args.rate * args.seconds)
        started = time.perf_counter()
        packages, failures = paced_loop(store, maintenance, args, offset, pages)
        elapsed = time.perf_counter() - started
        latencies = [ended - due for due, ended in packages]
        reports: list[dict[str, Any]] = []
        if maintenance is not None:
            maintenance.wait(600)
            reports = [r.as_dict() for r in maintenance.reports]
            failures += getattr(maintenance, "failures", 0)
        steps: dict[str, list[float]] = {}
        for r in reports:
            steps.setdefault(str(r["step"]), []).append(float(r["seconds"]))
        files = store.file_stats().files
    spark.stop()
    return {
        "variant": args.variant,
        "packages": count,
        "elapsed_s": round(elapsed, 1),
        "p50_s": round(statistics.median(latencies), 3),
        "p99_s": round(percentile(latencies, 99), 3),
        "max_s": round(max(latencies), 3),
        "maintenance_steps": {k: {"runs": len(v), "seconds": v} for k, v in steps.items()},
        "slow": slow_packages(packages, clock, statistics.median(latencies)),
        "maintenance_failures": failures,
        "files_after": files,
    }


def paced(args: argparse.Namespace) -> dict[str, Any]:
    """Every tree with and without maintenance, each run in its own process, alternating."""
    trees = {"after": str(REPO_DIR)}
    if args.before:
        trees = {"before": str(Path(args.before).resolve()), **trees}
    runs: list[dict[str, Any]] = []
    # A tree before the fold worker has no with-worker variant.
    variants = {t: PACED_VARIANTS if t == "after" else PACED_VARIANTS[:2] for t in trees}
    if args.variants:
        variants = {t: ("without", *args.variants.split(",")) for t in trees}
    order = [(tree, variant) for tree in trees for variant in variants[tree]]
    for r in range(args.runs):
        for tree, variant in order if r % 2 == 0 else order[::-1]:
            command = [sys.executable, str(Path(__file__).resolve()), "paced-run"]
            command += ["--store", args.store, "--pages", str(args.pages), "--variant", variant]
            command += ["--rate", str(args.rate), "--seconds", str(args.seconds)]
            command += ["--interval-s", str(args.interval_s), "--seed", str(r)]
            command += ["--retention-s", str(args.retention_s), "--warmup", str(args.warmup)]
            if args.work_dir:
                command += ["--work-dir", args.work_dir]
            out = subprocess.run(
                command,
                env=tree_env(trees[tree]),
                # In the tree: a fold worker (python -c) finds its modules first in its cwd.
                cwd=trees[tree],
                check=True,
                stdout=subprocess.PIPE,
                text=True,
            ).stdout
            # From the first object: a JVM may print lines of its own first (Delta's VACUUM).
            found = {"run": r, "tree": tree, **json.loads(out[out.find("{") :])}
            runs.append(found)
            print(json.dumps(found), file=sys.stderr, flush=True)
    table: dict[str, Any] = {}
    for tree in trees:
        for variant in variants[tree]:
            chosen = [x for x in runs if x["tree"] == tree and x["variant"] == variant]
            table[f"{tree}/{variant}"] = {
                "p50_s": [x["p50_s"] for x in chosen],
                "p99_s": [x["p99_s"] for x in chosen],
                "max_s": [x["max_s"] for x in chosen],
            }
    for tree in trees:
        without = table[f"{tree}/without"]
        for variant in variants[tree][1:]:
            with_ = table[f"{tree}/{variant}"]
            table[f"{tree}/ratio_p99_{variant}_to_p50_without"] = [
                round(a / b, 2) for a, b in zip(with_["p99_s"], without["p50_s"], strict=True)
            ]
    return {
        "store": args.store,
        "pages": args.pages,
        "rate_per_s": args.rate,
        "seconds": args.seconds,
        "trees": trees,
        "summary": table,
        "runs": runs,
    }


COST_VARIANTS = ("scd", "hadoop")


def _cpu_s(pid: int) -> tuple[float, float]:
    """CPU seconds of process ``pid`` and of the processes it started and waited for."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


def commit_cost_run(args: argparse.Namespace) -> dict[str, Any]:
    """One variant, in this process."""
    spark = session("scd-bench-commit-cost", local_fs=args.variant == "scd")
    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    with warm_copy(spark, args) as (store, offset):
        python0, (jvm0, children0), started = _cpu_s(os.getpid())[0], _cpu_s(jvm_pid), time.time()
        times = []
        for _ in range(args.commits):
            times.append(
                timed_commit(store, [unit(offset, page_package(f"c{offset}", 20 * offset, 0))])
            )
            offset += 1
        python1, (jvm1, children1), ended = _cpu_s(os.getpid())[0], _cpu_s(jvm_pid), time.time()
    spark.stop()
    n = args.commits
    return {
        "variant": args.variant,
        "commits": n,
        "wall_per_commit_s": round((ended - started) / n, 4),
        "median_commit_s": round(statistics.median(times), 4),
        "python_cpu_per_commit_s": round((python1 - python0) / n, 4),
        "jvm_cpu_per_commit_s": round((jvm1 - jvm0) / n, 4),
        "child_processes_cpu_per_commit_s": round((children1 - children0) / n, 4),
    }


def commit_cost(args: argparse.Namespace) -> dict[str, Any]:
    """Both variants, each run in its own process (the JVM keeps its classpath), alternating."""
    runs: list[dict[str, Any]] = []
    for r in range(args.runs):
        for variant in COST_VARIANTS if r % 2 == 0 else COST_VARIANTS[::-1]:
            command = [sys.executable, str(Path(__file__).resolve()), "commit-cost-run"]
            command += ["--store", args.store, "--variant", variant]
            command += ["--commits", str(args.commits), "--warmup", str(args.warmup)]
            if args.work_dir:
                command += ["--work-dir", args.work_dir]
            out = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout
            runs.append({"run": r, **json.loads(out)})
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    summary: dict[str, Any] = {}
    for variant in COST_VARIANTS:
        chosen = [x for x in runs if x["variant"] == variant]
        summary[variant] = {
            key: [x[key] for x in chosen] for key in chosen[0] if key.endswith("_s")
        }
    scd, hadoop = summary["scd"], summary["hadoop"]
    summary["wall_scd_to_hadoop"] = [
        round(a / b, 2)
        for a, b in zip(scd["wall_per_commit_s"], hadoop["wall_per_commit_s"], strict=True)
    ]
    return {"store": args.store, "summary": summary, "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate")
    gen.add_argument("--store", required=True)
    gen.add_argument("--pages", type=int, default=100_000)
    gen.add_argument("--layout", choices=["sorted", "random"], default="sorted")
    mea = sub.add_parser("measure")
    mea.add_argument("--store", required=True)
    mea.add_argument("--pages", type=int, default=100_000, help="pages the store was made with")
    mea.add_argument("--rounds", type=int, default=7)
    sml = sub.add_parser("small")
    sml.add_argument("--commits", type=int, default=20)
    sml.add_argument("--seed", type=int, default=0)
    cmp = sub.add_parser("compare")
    cmp.add_argument("--before", required=True, help="source tree of the variant to compare")
    cmp.add_argument("--runs", type=int, default=4)
    cmp.add_argument("--commits", type=int, default=20)
    for name in ("paced", "paced-run"):
        pac = sub.add_parser(name)
        pac.add_argument("--store", required=True, help="a generated store (copied per run)")
        pac.add_argument("--pages", type=int, default=100_000, help="pages it was made with")
        pac.add_argument("--rate", type=float, default=10.0, help="packages per second")
        pac.add_argument("--seconds", type=float, default=90.0)
        pac.add_argument("--interval-s", type=float, default=20.0, help="maintenance interval")
        pac.add_argument("--retention-s", type=float, default=120.0, help="file retention")
        pac.add_argument("--warmup", type=int, default=5, help="commits before the clock starts")
        pac.add_argument("--work-dir", default=None, help="where the copies go")
        if name == "paced":
            pac.add_argument("--before", default=None, help="source tree to compare with")
            pac.add_argument("--runs", type=int, default=1)
            pac.add_argument(
                "--variants",
                default=None,
                help="those run for every tree beside 'without' (say, with-worker); default: "
                "with and with-worker, and only with for --before (a tree without the worker)",
            )
        else:
            pac.add_argument("--variant", choices=PACED_VARIANTS, required=True)
            pac.add_argument("--seed", type=int, default=0)
    for name in ("commit-cost", "commit-cost-run"):
        cost = sub.add_parser(name)
        cost.add_argument("--store", required=True, help="a generated store (copied per run)")
        cost.add_argument("--commits", type=int, default=150)
        cost.add_argument("--warmup", type=int, default=40, help="commits before the clock starts")
        cost.add_argument("--work-dir", default=None, help="where the copies go")
        if name == "commit-cost":
            cost.add_argument("--runs", type=int, default=2)
        else:
            cost.add_argument("--variant", choices=COST_VARIANTS, required=True)
    args = parser.parse_args()
    handlers = {
        "generate": generate,
        "measure": measure,
        "small": small,
        "compare": compare,
        "paced": paced,
        "paced-run": paced_run,
        "commit-cost": commit_cost,
        "commit-cost-run": commit_cost_run,
    }
    print(json.dumps(handlers[args.command](args), indent=2))


if __name__ == "__main__":
    main()
