"""A hundred real subscribers on one publisher: the scenario of tests/e2e/test_hundred.py and of
bench/subscriber_hundred.py, at the size each asks for.

One publisher daemon (deploy/cluster.sh, as in tests/e2e/cluster.py) and subscriber daemons
(``scd subscriber`` with an agents file each, several agents on one Spark driver), every agent
with its own Delta store on local disk, on the real Kafka broker and S3 server. Requests go
through the publisher's REST API (tests/e2e/workload.py: adds and deletes of a small tree, some
spilled to S3). While they are distributed, one daemon with ``leave`` agents stops (they leave),
and a new daemon starts ``join`` agents: half on a copy of a running agent's store (seeded by
cloning), half on empty stores from ``earliest``.

Measured on the way: the resident memory of every daemon's process tree, each joiner's time
from its daemon's start to ready (and the daemon's own start, the part that is Spark's), the
time until every subscriber holds the last package, the publisher's GET /queues latency with
every subscriber announcing, how long its queues take to follow a leave and a join, and its
CPU seconds. Checked at the end: every store equals the model of the log, each store's Delta
log covers every offset once, one distributed event per package.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx

from runtime.stats import percentile
from subscriber.maintenance.delta_table import quoted
from subscriber.store.current_tree import current_nodes_sql
from subscriber.store.rows import KIND_NODE, KIND_SCOPE, StoredNode
from subscriber.writer.lease import LEASE_DIR
from tests import services
from tests.cluster_script import ClusterScript, free_port_block, group_members
from tests.e2e.cluster import TOKEN, Cluster, Outcome
from tests.e2e.workload import ContentModel, Workload, content_differences, stored_summary
from tests.services import KafkaService, S3Service

MIB = 1024 * 1024
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PROBE_TIMEOUT_S = 5.0
# A daemon finishes the import in progress on SIGTERM and stops Spark: 25+ agents take a while.
STOP_TIMEOUT_S = 180.0
# Faster than the defaults (10 s, 30 s, 5 s) so that the queues follow within seconds: the
# publisher forgets a subscriber not announced for DISCOVERY_TTL_S.
ANNOUNCE_INTERVAL_S = 2.0
DISCOVERY_TTL_S = 10.0
VIEW_REFRESH_S = 0.5
# Polls of the daemons' /health and the publisher's /queues while the stream runs.
SAMPLE_EVERY_S = 1.0
# Stores compared per Spark job (a union of their current-tree queries): one job per store
# costs a second each on a loaded machine, one plan over a hundred grows slow to analyse.
STORES_PER_JOB = 25


def log(text: str) -> None:
    print(f"[hundred] {text}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- processes


def tree_usage(pid: int) -> tuple[float, float]:
    """(resident MiB, CPU seconds) of the process group ``pid`` leads (a daemon started in a
    session of its own: the Python process and its Spark JVM)."""
    rss = cpu = 0.0
    for member in group_members({pid}):
        one = member.split()[0]
        try:
            rss += int(Path(f"/proc/{one}/statm").read_text().split()[1]) * PAGE_BYTES / MIB
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        cpu += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime
    return rss, cpu


@dataclass
class Daemon:
    """One ``scd subscriber`` with an agents file: ``agents`` maps each name to its store."""

    name: str
    agents: dict[str, Path]
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path
    started: float  # time.monotonic() at its start
    since: dict[str, float] = field(default_factory=dict)  # agent -> when it was started
    peak_rss_mib: float = 0.0
    ready_s: dict[str, float] = field(default_factory=dict)  # agent -> start to ready
    http_s: float | None = None  # start to /health answering: Spark's start and the agents'

    @classmethod
    def start(
        cls, name: str, agents: dict[str, Path], env: dict[str, str], directory: Path
    ) -> Daemon:
        agents_file = directory / f"{name}.toml"
        write_agents_file(agents_file, agents)
        port = free_port_block(1)
        log_path = directory / f"{name}.log"
        environment = {
            **env,
            "SCD_SUBSCRIBER_AGENTS_FILE": str(agents_file),
            "SCD_SUBSCRIBER_HTTP_PORT": str(port),
        }
        with log_path.open("wb") as out:
            proc = subprocess.Popen(
                [str(Path(sys.executable).with_name("scd")), "subscriber"],
                env=environment,
                cwd=directory,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        started = time.monotonic()
        return cls(
            name, dict(agents), port, proc, log_path, started, dict.fromkeys(agents, started)
        )

    def reload(self, agents: dict[str, Path]) -> None:
        """Run ``agents`` from now on: rewrite the agents file and SIGHUP the daemon (it
        starts the added agents on its running Spark driver and stops the removed ones)."""
        write_agents_file(self.log_path.with_suffix(".toml"), agents)
        now = time.monotonic()
        self.since.update({n: now for n in agents if n not in self.agents})
        self.agents = dict(agents)
        self.proc.send_signal(signal.SIGHUP)

    def agent_health(self) -> dict[str, dict[str, Any]]:
        """Each agent's /health entry; empty while the endpoint does not answer."""
        if self.proc.poll() is not None:
            return {}
        try:
            answer = httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=PROBE_TIMEOUT_S)
            return {a["agent"]: a for a in answer.json()["agents"]}
        except (httpx.HTTPError, ValueError, KeyError):
            return {}

    def sample(self) -> dict[str, dict[str, Any]]:
        """Health now; notes the memory peak, the endpoint's first answer, agents' readiness."""
        rss, _ = tree_usage(self.proc.pid)
        self.peak_rss_mib = max(self.peak_rss_mib, rss)
        health = self.agent_health()
        now = time.monotonic()
        if health and self.http_s is None:
            self.http_s = now - self.started
        for name, agent in health.items():
            if agent.get("ready") and name in self.since and name not in self.ready_s:
                self.ready_s[name] = now - self.since[name]
        return health

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return f"--- {self.log_path} ---\n" + "\n".join(text[-lines:])

    def stop(self) -> int:
        """SIGTERM, then wait for it (SIGKILL of its group if it does not exit in time)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
                raise AssertionError(f"{self.name} ignored SIGTERM\n{self.log_tail()}") from None
        if group_members({self.proc.pid}):  # a Spark JVM that outlived the daemon
            os.killpg(self.proc.pid, signal.SIGKILL)
        return self.proc.returncode


def write_agents_file(path: Path, agents: dict[str, Path]) -> None:
    path.write_text(
        "".join(f'[[agent]]\nname = "{n}"\nstore_path = "{p}"\n' for n, p in agents.items())
    )


def clone_store(source: Path, target: Path) -> None:
    """Copy a running agent's store (docs/content-store.md, seeding by cloning): the Delta log
    first, then the data files (every commit copied refers to files written before it, so
    they are there, whatever the source commits meanwhile), never its writer lease (the
    source's: the clone would wait for it to expire)."""
    target.mkdir(parents=True)
    shutil.copytree(source / "_delta_log", target / "_delta_log")
    for entry in source.iterdir():
        if entry.name in ("_delta_log", LEASE_DIR):
            continue
        if entry.is_dir():
            shutil.copytree(entry, target / entry.name)
        else:
            shutil.copy2(entry, target / entry.name)


# ---------------------------------------------------------------- checks


def log_ranges(store: Path) -> list[tuple[int, int, int]]:
    """(first offset, last offset, version) of every import commit in the store's Delta log,
    read from its commit files (the commit metadata docs/content-store.md describes)."""
    out = []
    for path in sorted((store / "_delta_log").glob("*.json")):
        for line in path.read_text().splitlines():
            info = json.loads(line).get("commitInfo")
            if info and info.get("userMetadata"):
                metadata = json.loads(info["userMetadata"])
                if "offsets" in metadata:
                    first, last = metadata["offsets"]
                    out.append((int(first), int(last), int(path.stem)))
    return out


def offset_problems(name: str, store: Path, last: int | None) -> list[str]:
    """Import commits that overlap (an offset imported twice) or leave a gap; a last commit
    short of ``last`` (None: not checked, an agent that left)."""
    ranges = log_ranges(store)
    if not ranges:
        return [f"{name}: no import commit in its Delta log"]
    out = []
    for (_, prev_last, prev_version), (first, _, version) in itertools.pairwise(ranges):
        if first != prev_last + 1:
            what = "imported twice" if first <= prev_last else "a gap"
            out.append(
                f"{name}: commit {version} starts at offset {first} after commit "
                f"{prev_version} ended at {prev_last} ({what})"
            )
    if ranges[0][0] != -1:
        out.append(f"{name}: its log starts at offset {ranges[0][0]}, not -1")
    if last is not None and ranges[-1][1] != last:
        out.append(f"{name}: its last import commit ends at {ranges[-1][1]}, not {last}")
    return out


def active_files(store: Path) -> list[str]:
    """The data files of a local Delta table's current version: added by its log, not removed."""
    files: dict[str, bool] = {}
    for commit in sorted((store / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                files[unquote(action["add"]["path"])] = True
            elif "remove" in action:
                files.pop(unquote(action["remove"]["path"]), None)
    return list(files)


def current_tree(store: Path) -> tuple[dict[str, StoredNode], list[str]]:
    """A local store's current tree read without Spark (a hundred stores read through Spark
    take minutes here): the data files its Delta log adds and does not remove, and of their
    node versions those no scope of a later offset covers (at the node itself, or deep at an
    ancestor), as the documented query (current_nodes_sql) selects them. Also the paths
    with more than one current version (that query would return each)."""
    import pyarrow.parquet as pq

    rows = [r for f in active_files(store) for r in pq.read_table(store / f).to_pylist()]
    scopes: dict[str, list[tuple[int, bool]]] = {}
    for row in rows:
        if row["kind"] == KIND_SCOPE:
            scopes.setdefault(row["path"], []).append((row["offset"], row["info"] == "deep"))

    def covered(path: str, offset: int) -> bool:
        parts = path.split("/")
        places = ["/"] + ["/".join(parts[:i]) for i in range(2, len(parts) + 1)]
        return any(
            later > offset and (deep or place == path)
            for place in places
            for later, deep in scopes.get(place, [])
        )

    nodes: dict[str, StoredNode] = {}
    twice = []
    for row in rows:
        if row["kind"] != KIND_NODE or covered(row["path"], row["offset"]):
            continue
        if row["path"] in nodes:
            twice.append(row["path"])
        row["properties"] = dict(row["properties"] or [])
        row["binaries"] = dict(row["binaries"] or [])
        nodes[row["path"]] = StoredNode.from_row(row)
    return nodes, twice


def content_problems(
    spark: Any, stores: dict[str, Path], model: ContentModel, *, with_spark: set[str]
) -> list[str]:
    """Each store's current tree against the model: read by current_tree(), and for the
    stores ``with_spark`` names also by the documented query through Spark."""
    out: list[str] = []
    for name, store in sorted(stores.items()):
        nodes, twice = current_tree(store)
        if twice:
            out.append(f"{name}: paths with two current versions: {sorted(twice)[:5]}")
        differences = content_differences(model, {p: stored_summary(n) for p, n in nodes.items()})
        if differences:
            out.append(f"{name}'s content differs from the model: " + "; ".join(differences))
    return out + spark_content_problems(spark, {n: stores[n] for n in with_spark}, model)


def spark_content_problems(spark: Any, stores: dict[str, Path], model: ContentModel) -> list[str]:
    """Each store's current tree (the documented query) against the model."""
    from pyspark.sql import functions as f

    out: list[str] = []
    names = sorted(stores)
    for start in range(0, len(names), STORES_PER_JOB):
        chunk = names[start : start + STORES_PER_JOB]
        frames = [
            spark.sql(current_nodes_sql(quoted(str(stores[n])))).withColumn("store", f.lit(n))
            for n in chunk
        ]
        rows = reduce(lambda a, b: a.unionByName(b), frames).collect()
        found: dict[str, dict[str, Any]] = {n: {} for n in chunk}
        for row in rows:
            node = StoredNode.from_row(row)
            found[row["store"]][node.path] = stored_summary(node)
        for name in chunk:
            differences = content_differences(model, found[name])
            if differences:
                out.append(f"{name}'s content differs from the model: " + "; ".join(differences))
    return out


# ---------------------------------------------------------------- the scenario


@dataclass(frozen=True)
class Size:
    agents: int = 100  # subscribers at any time but between a leave and a join
    daemons: int = 3  # daemons of the agents that stay (the leavers have one more)
    packages: int = 1000
    leave: int = 20
    join: int = 20  # half seeded by cloning, half from earliest
    spill_every: int = 50  # every n-th request is a deep ADD spilled to S3
    rate: float = 10.0  # requests per second
    driver_memory: str = "1g"  # each daemon's Spark driver
    maintenance: bool = True
    # Leave and join by rewriting running daemons' agents files (SIGHUP); else the leavers
    # run in a daemon of their own that stops, and the joiners in a new one.
    reload: bool = True


@dataclass
class Fleet:
    script: ClusterScript
    cluster: Cluster
    env: dict[str, str]
    work: Path
    daemons: list[Daemon] = field(default_factory=list)
    stores: dict[str, Path] = field(default_factory=dict)  # every agent ever, by name
    left: set[str] = field(default_factory=set)
    workload: Workload = field(default_factory=lambda: Workload(seed=100100))

    def running(self) -> dict[str, Daemon]:
        """agent -> its daemon, for every agent that has not left."""
        return {
            a: d
            for d in self.daemons
            for a in d.agents
            if a not in self.left and d.proc.poll() is None
        }

    def add_daemon(self, name: str, agents: dict[str, Path]) -> Daemon:
        daemon = Daemon.start(name, agents, self.env, self.work)
        self.daemons.append(daemon)
        self.stores.update(agents)
        return daemon

    def offsets(self) -> dict[str, int | None]:
        """Processed offset of every running agent (None: not answering)."""
        out: dict[str, int | None] = dict.fromkeys(self.running())
        for daemon in {id(d): d for d in self.running().values()}.values():
            for name, agent in daemon.sample().items():
                if name in out:
                    out[name] = agent.get("processedOffset")
        return out

    def queue_names(self) -> set[str]:
        return {q["subscriberAgentName"] for q in self.cluster.get("/queues?limit=1000")}

    def wait(self, condition: Callable[[], bool], timeout_s: float, what: str) -> float:
        """Seconds until ``condition`` held; fails naming ``what`` (and a daemon that died)."""
        started = time.monotonic()
        while not condition():
            for daemon in self.daemons:
                ended = daemon.proc.poll() is not None and daemon.proc.returncode != 0
                if ended and any(a not in self.left for a in daemon.agents):
                    raise AssertionError(f"{daemon.name} exited\n{daemon.log_tail()}")
            if time.monotonic() - started > timeout_s:
                tails = "\n".join(d.log_tail(15) for d in self.daemons if d.proc.poll() is None)
                raise AssertionError(f"not within {timeout_s:.0f} s: {what}\n{tails}")
            time.sleep(SAMPLE_EVERY_S)
        return time.monotonic() - started

    def close(self) -> None:
        for daemon in self.daemons:
            try:
                daemon.stop()
            except AssertionError as exc:
                log(str(exc))
        down = self.script.down()
        if down.returncode != 0:
            log(f"cluster.sh down: {down.stdout}{down.stderr}")
        self.cluster.close()


def start_fleet(
    kafka: KafkaService, s3: S3Service, work: Path, size: Size, start_timeout_s: float
) -> Fleet:
    """The publisher and the first ``size.agents`` agents (``size.leave`` of them in a daemon
    of their own), all ready, every queue seen by the publisher, distributed events started."""
    name = services.unique_name("hundred")
    settings = {
        "SCD_BLOB_CREATE_BUCKET": "true",
        "SCD_PUBLISHER_API_TOKEN": TOKEN,
        "SCD_PUBLISHER_AGENT_NAME": name,
        "SCD_PUBLISHER_INSTANCE_ID": "hundred-publisher",
        "SCD_PUBLISHER_VIEW_REFRESH_S": str(VIEW_REFRESH_S),
        "SCD_PUBLISHER_DISCOVERY_TTL_S": str(DISCOVERY_TTL_S),
    }
    (work / "cluster").mkdir(parents=True)
    script = ClusterScript.configure(work / "cluster", name, kafka, s3, 1, settings)
    script.up("publisher")
    cluster = Cluster(script, name, services.unique_topics(name), kafka.bootstrap, [])
    env = {
        **script.env,
        "SCD_JOURNAL_BACKEND": "kafka",
        "SCD_JOURNAL_BOOTSTRAP_SERVERS": kafka.bootstrap,
        "SCD_BLOB_BACKEND": "s3",
        "SCD_BLOB_ENDPOINT_URL": s3.endpoint_url,
        "SCD_BLOB_REGION": s3.region,
        "SCD_BLOB_ACCESS_KEY": s3.access_key,
        "SCD_BLOB_SECRET_KEY": s3.secret_key,
        "SCD_SUBSCRIBER_PUB_AGENTS": name,
        "SCD_SUBSCRIBER_RESET": "earliest",
        "SCD_SUBSCRIBER_ANNOUNCE_INTERVAL_S": str(ANNOUNCE_INTERVAL_S),
        "SCD_SUBSCRIBER_READY_IDLE_S": "2",
        "SCD_SUBSCRIBER_SPARK_DRIVER_MEMORY": size.driver_memory,
        "SCD_SUBSCRIBER_MAINTENANCE_ENABLED": str(size.maintenance).lower(),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }
    for prefix in ("SCD_CLUSTER_",):  # the launcher's own settings, not a daemon's
        env = {k: v for k, v in env.items() if not k.startswith(prefix)}
    stores_dir = work / "stores"
    stores_dir.mkdir(parents=True)
    fleet = Fleet(script, cluster, env, work)
    names = [f"sub-{i:03d}" for i in range(size.agents)]
    staying, leaving = names[: size.agents - size.leave], names[size.agents - size.leave :]
    if size.reload:  # the leavers leave their daemons
        staying, leaving = names, []
    groups = [staying[i :: size.daemons] for i in range(size.daemons)]
    try:
        for index, group in enumerate(groups):
            fleet.add_daemon(f"daemon-{index}", {n: stores_dir / n for n in sorted(group)})
        if leaving:
            fleet.add_daemon("leavers", {n: stores_dir / n for n in leaving})
        # Ready on an empty store: nothing imported yet (no offset, or -1 once announced).
        fleet.wait(
            lambda: (
                all(o in (None, -1) for o in fleet.offsets().values())
                and all(len(d.ready_s) == len(d.agents) for d in fleet.daemons)
            ),
            start_timeout_s,
            f"{size.agents} agents ready",
        )

        def events_ready() -> bool:
            agent = cluster.get("/agent")
            return bool(agent["leader"]) and agent["lastEventOffset"] == -1

        fleet.wait(
            lambda: fleet.queue_names() >= set(names) and events_ready(),
            start_timeout_s,
            f"the publisher to see {size.agents} queues and start events at -1",
        )
    except BaseException:
        fleet.close()
        raise
    return fleet


@dataclass
class Stream:
    """The requests distributed and what was seen while they were."""

    outcomes: list[Outcome] = field(default_factory=list)
    queues_s: list[float] = field(default_factory=list)
    queue_sizes: list[int] = field(default_factory=list)
    sent_s: float = 0.0  # first request to the last one answered
    sent_at: float = 0.0  # time.monotonic() when the last one was answered


def distribute(fleet: Fleet, size: Size, at: dict[int, Callable[[], None]], stream: Stream) -> None:
    """``size.packages`` requests at ``size.rate`` per second; ``at[i]`` runs (on its own
    thread) once request i was sent. GET /queues is timed every second meanwhile."""
    stop = threading.Event()

    def watch_queues() -> None:
        while not stop.is_set():
            begin = time.perf_counter()
            answer = fleet.cluster.http.get("/queues", params={"limit": 1000})
            stream.queues_s.append(time.perf_counter() - begin)
            if answer.status_code == 200:
                stream.queue_sizes.append(len(answer.json()))
            fleet.offsets()  # samples the daemons' memory and their agents' readiness
            stop.wait(SAMPLE_EVERY_S)

    watcher = threading.Thread(target=watch_queues, name="queues-watch", daemon=True)
    watcher.start()
    actions: list[threading.Thread] = []
    started = time.monotonic()
    try:
        with ThreadPoolExecutor(4) as pool:
            pending = []
            for i in range(size.packages):
                spill = i % size.spill_every == size.spill_every // 2
                request = fleet.workload.next("add-deep" if spill else None, spill=spill)
                pending.append(pool.submit(fleet.cluster.distribute, request.seq, request.body()))
                if i in at:
                    action = threading.Thread(target=at[i], name=f"at-{i}")
                    action.start()
                    actions.append(action)
                delay = started + (i + 1) / size.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            stream.outcomes = [p.result() for p in pending]
        stream.sent_at = time.monotonic()
        stream.sent_s = stream.sent_at - started
        for action in actions:
            action.join()
    finally:
        stop.set()
        watcher.join(30)


@dataclass
class Churn:
    """The leave and the join during the stream, and what they measured."""

    fleet: Fleet
    size: Size
    timeout_s: float
    leavers: Daemon | None  # the daemon that stops (Size.reload false)
    follow: dict[str, float] = field(default_factory=dict)
    cloned: dict[str, str] = field(default_factory=dict)  # joiner -> the agent it copied
    joiners: list[Daemon] = field(default_factory=list)  # the daemons the joiners run in
    ready_s: dict[str, float] = field(default_factory=dict)  # joiner -> its start to ready
    idle_ready_s: dict[str, float] = field(default_factory=dict)  # the same, fleet caught up

    def leave(self) -> None:
        if not self.size.leave:
            return
        begin = time.monotonic()
        if self.leavers is not None:
            gone = set(self.leavers.agents)
            self.leavers.stop()
        else:
            gone = set(sorted(self.fleet.running())[-self.size.leave :])
            daemons = [d for d in self.fleet.daemons if set(d.agents) & gone]
            for daemon in daemons:
                daemon.reload({n: p for n, p in daemon.agents.items() if n not in gone})
            self.fleet.wait(
                lambda: all(not (set(d.agent_health()) & gone) for d in daemons),
                STOP_TIMEOUT_S,
                "the leaving agents stopped",
            )
        self.fleet.left |= gone
        self.follow["leave_stop_s"] = time.monotonic() - begin
        self.follow["leave_queues_s"] = self.fleet.wait(
            lambda: not (self.fleet.queue_names() & gone),
            3 * DISCOVERY_TTL_S + 30,
            "the publisher to drop the leavers' queues",
        )
        log(f"{len(gone)} left; queues followed {self.follow['leave_queues_s']:.1f} s later")

    def join(self) -> None:
        if not self.size.join:
            return
        begin = time.monotonic()
        agents = self._new_agents("join", self.size.join)
        self.follow["clone_s"] = time.monotonic() - begin
        self.ready_s.update(self._start(agents, "joiners"))
        log(f"{len(agents)} joined; ready after {sorted(self.ready_s.values())}")

    def join_caught_up(self) -> None:
        """Two more agents once the whole fleet holds the last package (no import running):
        one on a clone, one from earliest. Their start to ready is what an autoscaler waits
        for when it adds a subscriber to a fleet that keeps up."""
        if not self.size.join:
            return
        self.idle_ready_s = self._start(self._new_agents("late", 2), "late-joiners")
        log(f"2 joined the caught-up fleet; ready after {sorted(self.idle_ready_s.values())}")

    def _new_agents(self, prefix: str, count: int) -> dict[str, Path]:
        """``count`` new agents' stores: the first half clones of running agents' stores, the
        others empty (they start from earliest)."""
        sources = sorted(self.fleet.running())
        agents: dict[str, Path] = {}
        for i in range(count):
            name = f"{prefix}-{i:03d}"
            target = self.fleet.work / "stores" / name
            if i < count // 2:  # seeded by cloning a running agent's store
                source = sources[i * len(sources) // max(1, count // 2)]
                clone_store(self.fleet.stores[source], target)
                self.cloned[name] = source
            agents[name] = target
        return agents

    def _start(self, agents: dict[str, Path], new_daemon: str) -> dict[str, float]:
        """Start ``agents`` (in the running daemons, or a new one named ``new_daemon``: its agents
        file and log are named after it) and wait until the publisher shows their queues and
        each is ready; returns each one's start to ready."""
        running = self.fleet.running()
        if self.size.reload:  # spread over the running daemons
            daemons = sorted({id(d): d for d in running.values()}.values(), key=lambda d: d.name)
            for index, daemon in enumerate(daemons):
                mine = {
                    n: p for i, (n, p) in enumerate(agents.items()) if i % len(daemons) == index
                }
                self.fleet.stores.update(mine)
                daemon.reload({**daemon.agents, **mine})
                self.joiners.append(daemon)
        else:
            self.joiners.append(self.fleet.add_daemon(new_daemon, agents))
        queues_s = self.fleet.wait(
            lambda: self.fleet.queue_names() >= set(agents),
            self.timeout_s,
            "the publisher to show the joiners' queues",
        )
        self.follow.setdefault("join_queues_s", queues_s)
        self.fleet.wait(
            lambda: (
                bool(self.fleet.offsets())
                and all(any(n in d.ready_s for d in self.joiners) for n in agents)
            ),
            self.timeout_s,
            "every joiner ready",
        )
        return {n: d.ready_s[n] for d in self.joiners for n in agents if n in d.ready_s}


def run_scenario(fleet: Fleet, size: Size, spark: Any, converge_timeout_s: float) -> dict[str, Any]:
    """Distribute, let ``size.leave`` agents leave and ``size.join`` join, wait until every
    running agent holds the last package, let two more join the caught-up fleet; check and
    measure everything. Returns the report
    (its ``problems`` list is empty when every check passed)."""
    cluster = fleet.cluster
    leavers = next((d for d in fleet.daemons if d.name == "leavers"), None)
    churn = Churn(fleet, size, converge_timeout_s, leavers)
    publisher_cpu_before = tree_usage(cluster.publisher.pid)[1]

    stream = Stream()
    third = size.packages // 3
    distribute(
        fleet,
        size,
        {third: churn.leave, min(size.packages - 1, third + third // 2): churn.join},
        stream,
    )
    refused = [o for o in stream.outcomes if o.status != 200]
    last = cluster.last_package_offset()
    fleet.wait(
        lambda: all(o == last for o in fleet.offsets().values()),
        converge_timeout_s,
        f"every running agent at offset {last}",
    )
    drain_s = time.monotonic() - stream.sent_at  # the join may end after the last send
    log(f"all {len(fleet.running())} hold offset {last} {drain_s:.1f} s after the last send")
    queues_settle_s = fleet.wait(
        lambda: (
            {q["subscriberAgentName"]: q["size"] for q in cluster.get("/queues?limit=1000")}
            == dict.fromkeys(fleet.running(), 0)
        ),
        DISCOVERY_TTL_S + 30,
        "every running agent's queue empty (and no other queue)",
    )
    publisher_cpu = tree_usage(cluster.publisher.pid)[1] - publisher_cpu_before
    quiet: list[float] = []
    for _ in range(100):
        begin = time.perf_counter()
        cluster.get("/queues?limit=1000")
        quiet.append(time.perf_counter() - begin)
    churn.join_caught_up()
    fleet.wait(
        lambda: all(o == last for o in fleet.offsets().values()),
        converge_timeout_s,
        f"the agents that joined the caught-up fleet at offset {last}",
    )
    for daemon in fleet.daemons:
        if daemon.proc.poll() is None:
            daemon.sample()

    # Checks.
    from tests.e2e.test_cluster import Run, check_events, check_log

    run = Run(cluster, fleet.workload)
    model = check_log(run)
    events = check_events(cluster, last)
    problems = [f"refused: {o.seq} {o.status} {o.message[:200]}" for o in refused[:5]]
    running = fleet.running()
    checked_at = time.monotonic()
    for name, store in sorted(fleet.stores.items()):
        problems += offset_problems(name, store, None if name in fleet.left else last)
    # Through Spark as well: a store of each daemon, a clone and a joiner from earliest.
    sample = {
        min(a for a in d.agents if a.startswith("sub-"))
        for d in fleet.daemons
        if d.proc.poll() is None and any(a.startswith("sub-") for a in d.agents)
    }
    sample |= set(sorted(churn.cloned)[:1]) | set(
        sorted(set(churn.ready_s) - set(churn.cloned))[:1]
    )
    problems += content_problems(
        spark, {n: fleet.stores[n] for n in running}, model, with_spark=sample & set(running)
    )
    check_s = time.monotonic() - checked_at

    total_rss = sum(d.peak_rss_mib for d in fleet.daemons if d is not leavers)
    new_daemon = churn.joiners[0] if churn.joiners and not size.reload else None
    return {
        "problems": problems,
        "packages": len(stream.outcomes),
        "last_offset": last,
        "spilled": sum(1 for o in stream.outcomes if o.spilled),
        "actions": {
            a: sum(1 for r in fleet.workload.requests.values() if r.action == a)
            for a in ("ADD", "DELETE")
        },
        "model_nodes": len(model.tree),
        "sent_s": round(stream.sent_s, 1),
        "drain_after_last_send_s": round(drain_s, 1),
        "all_hold_last_package_after_first_send_s": round(stream.sent_s + drain_s, 1),
        "queues_empty_after_drain_s": round(queues_settle_s, 1),
        "distribute_p99_ms": round(
            percentile([o.seconds for o in stream.outcomes] or [0.0], 99) * 1e3
        ),
        "queues_during_stream": {
            "calls": len(stream.queues_s),
            "queues_seen": [min(stream.queue_sizes, default=0), max(stream.queue_sizes, default=0)],
            "p50_ms": round(percentile(stream.queues_s or [0.0], 50) * 1e3, 1),
            "p99_ms": round(percentile(stream.queues_s or [0.0], 99) * 1e3, 1),
        },
        "queues_quiet": {
            "calls": len(quiet),
            "p50_ms": round(percentile(quiet or [0.0], 50) * 1e3, 1),
            "p99_ms": round(percentile(quiet or [0.0], 99) * 1e3, 1),
        },
        "publisher_cpu_s": round(publisher_cpu, 1),
        "publisher_rss_mib": round(tree_usage(cluster.publisher.pid)[0], 1),
        "daemons": [
            {
                "name": d.name,
                "agents": len(d.agents),
                "peak_rss_mib": round(d.peak_rss_mib),
                "rss_per_agent_mib": round(d.peak_rss_mib / len(d.agents), 1),
                "start_to_http_s": None if d.http_s is None else round(d.http_s, 1),
                "start_to_all_ready_s": round(max(d.ready_s.values(), default=0.0), 1),
            }
            for d in fleet.daemons
        ],
        "total_peak_rss_mib": round(total_rss),
        "rss_per_agent_mib": round(total_rss / max(1, size.agents), 1),
        "queues_follow": {k: round(v, 1) for k, v in churn.follow.items()},
        "joiners": {
            name: {
                "seed": f"clone of {churn.cloned[name]}" if name in churn.cloned else "earliest",
                "start_to_ready_s": round(seconds, 1),
            }
            for name, seconds in sorted(churn.ready_s.items())
        },
        "joiners_of_the_caught_up_fleet": {
            name: {
                "seed": f"clone of {churn.cloned[name]}" if name in churn.cloned else "earliest",
                "start_to_ready_s": round(seconds, 1),
            }
            for name, seconds in sorted(churn.idle_ready_s.items())
        },
        "joiners_in": "running daemons (SIGHUP)" if size.reload else "a new daemon",
        "joiner_daemon_start_to_http_s": None
        if new_daemon is None or new_daemon.http_s is None
        else round(new_daemon.http_s, 1),
        "events": events,
        "stores_checked": len(running),
        "stores_checked_with_spark": len(sample & set(running)),
        "store_logs_checked": len(fleet.stores),
        "check_s": round(check_s, 1),
    }
