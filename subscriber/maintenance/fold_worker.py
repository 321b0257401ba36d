"""A fold worker: a process of its own, at the lowest CPU priority, that computes the stores'
folds and compactions (subscriber.maintenance.rewrites.plan and compaction.plan), writes
their checkpoints and runs their VACUUMs (subscriber.maintenance.delta_table), so that
the imports keep the cores.

On one machine a fold's work (it reads, joins and rewrites files: seconds to minutes of one core)
and the imports share the CPU, whatever Spark's scheduler pools say: with a fold running in the
store's process, the imports of a million-node store at 10 packages/s waited for it; with this
worker their p99 stays about twice their p50 without maintenance
(docs/benchmarks.md#subscriber_bigstore, ``paced``). A thread cannot be given a lower priority of
its own (a JVM's threads get none without root, and Spark's task threads serve imports and folds
alike), a process can: this one runs at nice 19, so the kernel gives the imports' process the CPU
first (an import's p50 rose 52% beside a busy process at nice 0, 14% beside one at nice 19). It
writes the new files and hands back the actions (a RewritePlan); the store commits them under its
lock, as the table's one writer (on S3, Delta's log must be written by one process). A checkpoint
commits nothing: the worker writes it whole (the state of a committed version), and the store's next
read of its log starts there. Nor does its VACUUM: it deletes files no version within the retention
reads.

The worker is a child of the subscriber's process with a local Spark session (``local[1]``)
made from the store's session's settings, sent on its standard input; the S3 credentials come
with them and go into its JVM's Hadoop configuration, never on a command line (neither its own
nor its JVM's: subscriber.spark.s3a_credentials). It runs one step at a time, and exits at
the end of its input: when the subscriber stops or dies. A worker that dies, hangs past the
timeout or answers nonsense is stopped; the step fails (a transient error: the next one starts
a new worker).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import queue
import select
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import IO, Any, overload

from subscriber.errors import FoldWorkerError, RewriteConflict
from subscriber.maintenance.rewrites import COMPACT, FOLD, RewritePlan
from subscriber.store.base import StepOutcome

log = logging.getLogger(__name__)

NICE = 19
# A fold of 200 scopes on the million-node store took 12-44 s with the imports beside it; one
# that takes this long is taken as hung (its files are left for VACUUM).
DEFAULT_TIMEOUT_S = 1800.0
# A worker exits after this long without a fold: its JVM holds about 1 GiB
# (docs/benchmarks.md#subscriber_bigstore),
# and folds come minutes to hours apart; one that comes later starts a new worker (seconds of
# CPU at the lowest priority).
DEFAULT_IDLE_S = 120.0
# Bounds on one line of the protocol: a plan lists a fold's files (hundreds of actions of
# about 1 KiB each on the million-node store).
MAX_LINE_BYTES = 64 << 20
# The steps it runs (besides rewrites.FOLD and rewrites.COMPACT).
CHECKPOINT, VACUUM = "checkpoint", "vacuum"
# What the reader hands on for a line past the bound (not a line the worker can write).
OVERSIZED = b"\x00"
# The store's session's settings that are its process's own, not the worker's.
_NOT_INHERITED = (
    "spark.master",
    "spark.app.name",
    "spark.app.id",
    "spark.app.startTime",
    "spark.app.submitTime",
    "spark.driver.port",
    "spark.executor.id",
    "spark.scheduler.mode",
    "spark.scheduler.allocation.file",
)
# The worker's own: one task at a time (it is the maintenance's one core).
WORKER_CONF = {
    "spark.master": "local[1]",
    # Its driver and executor are one JVM on this machine: the loopback interface, whatever
    # host the store's session binds to.
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.app.name": "scd-fold-worker",
    "spark.ui.enabled": "false",
}


WORKER_COMMAND = (
    sys.executable,
    "-c",
    "from subscriber.maintenance.fold_worker import main; main()",
)


class _IdleExit(FoldWorkerError):
    """The worker exited on its own, idle, before it read the request."""


class FoldWorker:
    """The client: starts the worker when first asked for a fold, stops it on ``close``."""

    def __init__(
        self,
        spark_conf: dict[str, str],
        timeout_s: float = DEFAULT_TIMEOUT_S,
        command: Sequence[str] = WORKER_COMMAND,
        idle_s: float = DEFAULT_IDLE_S,
        hadoop: Mapping[str, str] | None = None,
    ) -> None:
        """``command``: the worker's (tests run others in its place); ``idle_s``: the worker
        exits after this long without a fold; ``hadoop``: settings of the Hadoop configuration
        of its JVM (the S3 credentials, subscriber.spark.s3a_credentials)."""
        self.idle_s = idle_s
        self._hadoop = dict(hadoop or {})
        self._conf = {k: v for k, v in spark_conf.items() if k not in _NOT_INHERITED} | WORKER_CONF
        self.timeout_s = timeout_s
        self.command = list(command)
        self._process: subprocess.Popen[bytes] | None = None
        self._replies: queue.Queue[bytes] = queue.Queue()
        self._lock = threading.Lock()  # one fold at a time
        self._closed = False

    @classmethod
    def of(cls, spark: Any, timeout_s: float = DEFAULT_TIMEOUT_S) -> FoldWorker:
        """A worker with the settings of ``spark``'s context."""
        from subscriber.spark import hadoop_credentials

        conf = spark.sparkContext.getConf().getAll()
        return cls({str(k): str(v) for k, v in conf}, timeout_s, hadoop=hadoop_credentials(spark))

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def plan(self, location: str, max_scopes: int) -> RewritePlan:
        """The fold of the store at ``location``, computed by the worker."""
        return self._plan(self._asked({"op": FOLD, "location": location, "max_scopes": max_scopes}))

    def _plan(self, reply: dict[str, Any]) -> RewritePlan:
        try:
            return RewritePlan.from_dict(reply.get("plan"))
        except ValueError as exc:
            self._stop()
            raise FoldWorkerError(f"the fold worker answered nonsense: {exc}") from None

    def compaction(self, location: str, target_file_bytes: int, min_files: int) -> RewritePlan:
        """The compaction of the store at ``location`` (subscriber.maintenance.compaction), computed
        by the worker."""
        request = {
            "op": COMPACT,
            "location": location,
            "target_file_bytes": target_file_bytes,
            "min_files": min_files,
        }
        return self._plan(self._asked(request))

    def checkpoint(self, location: str) -> bool:
        """A checkpoint of the store at ``location`` (delta_table.checkpoint), written by
        the worker; False, and nothing written, when the worker is busy with another step (a
        checkpoint is short and due every few commits: it need not queue behind a fold)."""
        reply = self._asked({"op": CHECKPOINT, "location": location}, wait=False)
        if reply is None:
            return False
        if reply.get("done") is not True:
            self._stop()
            raise FoldWorkerError(f"the fold worker answered nonsense: {reply!r:.200}")
        return True

    def vacuum(self, location: str) -> StepOutcome:
        """VACUUM of the store at ``location`` (delta_table.vacuum), by the worker: the
        table's files, the files it deleted and their bytes."""
        reply = self._asked({"op": VACUUM, "location": location})
        try:
            return StepOutcome.from_dict(reply.get("outcome"))
        except ValueError as exc:
            self._stop()
            raise FoldWorkerError(f"the fold worker answered nonsense: {exc}") from None

    @overload
    def _asked(self, request: dict[str, Any]) -> dict[str, Any]: ...
    @overload
    def _asked(self, request: dict[str, Any], *, wait: bool) -> dict[str, Any] | None: ...
    def _asked(self, request: dict[str, Any], *, wait: bool = True) -> dict[str, Any] | None:
        """The worker's reply to ``request``, one request at a time; None, without asking,
        when another request is under way and not ``wait``."""
        if not self._lock.acquire(blocking=wait):
            return None
        try:
            try:
                return self._ask(request)
            except _IdleExit:  # it left as the request went out: a new one takes it
                return self._ask(request)
        finally:
            self._lock.release()

    def _ask(self, question: dict[str, Any]) -> dict[str, Any]:
        process = self._started()
        request = json.dumps(question)
        try:
            assert process.stdin is not None
            process.stdin.write(request.encode() + b"\n")
            process.stdin.flush()
            line = self._replies.get(timeout=self.timeout_s)
        except OSError:
            line = b""  # its input closed: it is gone, as its exit code says
        except queue.Empty:
            self._stop()
            raise FoldWorkerError(
                f"the fold worker did not answer within {self.timeout_s:.0f} s"
            ) from None
        if line is OVERSIZED:
            self._stop()
            raise FoldWorkerError(f"the fold worker answered a line over {MAX_LINE_BYTES} bytes")
        if not line:
            code = self._stop()
            if code == 0:
                raise _IdleExit("the fold worker exited, idle")
            raise FoldWorkerError(f"the fold worker exited ({code})")
        return self._answer(line)

    def _answer(self, line: bytes) -> dict[str, Any]:
        try:
            reply = json.loads(line)
            if not isinstance(reply, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            self._stop()
            raise FoldWorkerError(f"the fold worker answered nonsense: {exc}") from None
        if "error" in reply:
            if reply.get("conflict") is True:
                raise RewriteConflict(str(reply["error"]))
            raise FoldWorkerError(f"the step failed in the fold worker: {reply['error']}")
        return reply

    def __enter__(self) -> FoldWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker, a fold in progress too (it fails); no fold after this."""
        self._closed = True
        self._stop()

    def _started(self) -> subprocess.Popen[bytes]:
        if self._closed:
            raise FoldWorkerError("the fold worker is closed (the subscriber stops)")
        if self._process is not None and self._process.poll() is None:
            return self._process
        self._stop()
        process = subprocess.Popen(
            self.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert process.stdin is not None
        assert process.stdout is not None
        settings = {"spark": self._conf, "hadoop": self._hadoop, "idle_s": self.idle_s}
        process.stdin.write(json.dumps(settings).encode() + b"\n")
        process.stdin.flush()
        self._replies = queue.Queue()
        threading.Thread(
            target=_read_lines,
            args=(process.stdout, self._replies),
            name=f"fold-worker-{process.pid}-reader",
            daemon=True,
        ).start()
        self._process = process
        log.info("fold worker started (pid %d, nice %d)", process.pid, NICE)
        return process

    def _stop(self) -> int | None:
        """Stop the worker (if any); its exit code."""
        process, self._process = self._process, None
        if process is None:
            return None
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()  # the end of its input: it exits
        try:
            return process.wait(5.0)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()


def _read_lines(stream: IO[bytes], replies: queue.Queue[bytes]) -> None:
    """Each line of the worker's output, then b"" at its end, or OVERSIZED for a line past
    the bound (nothing after it is read)."""
    try:
        while line := stream.readline(MAX_LINE_BYTES + 1):
            if len(line) > MAX_LINE_BYTES:
                replies.put(OVERSIZED)
                return
            replies.put(line)
    except (OSError, ValueError):
        pass  # closed: the worker is gone, which the empty line below says
    replies.put(b"")


# ---------------------------------------------------------------------- the worker's side
def serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    """The worker: its Spark settings on the first line, then one step per line (``op``:
    FOLD, COMPACT, CHECKPOINT or VACUUM). ``requests`` is unbuffered (see ``_ready``)."""
    from subscriber.maintenance import compaction, delta_table, rewrites

    first = requests.readline(MAX_LINE_BYTES)
    if not first:
        return  # the subscriber stopped before the first fold
    settings = json.loads(first)
    spark = _session(settings["spark"], settings["hadoop"])
    idle_s = float(settings["idle_s"])
    while _ready(requests, idle_s) and (line := requests.readline(MAX_LINE_BYTES)):
        reply: dict[str, Any]
        try:
            request = json.loads(line)
            location = str(request["location"])
            with delta_table.active_session(spark):
                if request["op"] == FOLD:
                    plan = rewrites.plan(spark, location, int(request["max_scopes"]))
                    reply = {"plan": dataclasses.asdict(plan)}
                elif request["op"] == COMPACT:
                    target, least = int(request["target_file_bytes"]), int(request["min_files"])
                    rewrite = compaction.plan(spark, location, target, least)
                    reply = {"plan": dataclasses.asdict(rewrite)}
                elif request["op"] == CHECKPOINT:
                    delta_table.checkpoint(spark, location)
                    reply = {"done": True}
                elif request["op"] == VACUUM:
                    outcome = delta_table.vacuum(spark, location)
                    reply = {"outcome": dataclasses.asdict(outcome)}
                else:
                    reply = {"error": f"no such step: {request['op']!r:.100}"}
        except RewriteConflict as exc:
            reply = {"error": str(exc), "conflict": True}
        except Exception as exc:  # the step failed: the store's maintenance step says so
            log.exception("maintenance step failed")
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        replies.write(json.dumps(reply).encode() + b"\n")
        replies.flush()


def _ready(requests: IO[bytes], idle_s: float) -> bool:
    """True when a request comes (or the input ends) within ``idle_s``; False: the worker
    exits, and its memory (a JVM) is given back until the next fold."""
    readable, _, _ = select.select([requests], [], [], idle_s)
    return bool(readable)


def _session(conf: dict[str, str], hadoop: dict[str, str]) -> Any:
    """The worker's session: the store's context settings and Hadoop settings, and the SQL
    settings of a store's maintenance session (subscriber.maintenance.sessions)."""
    from pyspark.sql import SparkSession

    from subscriber.maintenance.sessions import MAINTENANCE_SESSION_CONF, STORE_SESSION_CONF
    from subscriber.spark import SPARK_LOG_LEVEL, set_hadoop

    builder = SparkSession.builder
    for key, value in {**conf, **STORE_SESSION_CONF, **MAINTENANCE_SESSION_CONF}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(SPARK_LOG_LEVEL)
    set_hadoop(spark, hadoop)
    return spark


def main() -> None:
    """The worker process (WORKER_COMMAND)."""
    os.nice(NICE)  # before its JVM starts: the JVM's threads inherit it
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    # Its output is the protocol's: anything else printed goes to the error stream, the
    # output of its JVM (which inherits the descriptor) too.
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    # Unbuffered: a request read ahead into a buffer is one that select() does not see.
    serve(os.fdopen(sys.stdin.fileno(), "rb", buffering=0), protocol)
