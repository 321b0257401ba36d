"""The fold worker's client (subscriber.maintenance.fold_worker) against workers that misbehave,
each a real process in the worker's place: one that exits, one that answers nonsense, one that
hangs, one that answers a line past the bound, one that reports a conflict or a failure. Each
fails the fold with a clear error that says whether a retry helps, and the next fold starts a
new worker. The plan's JSON is checked field by field. (The real worker, on real Spark:
tests/subscriber/integration/test_maintenance.py.)"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from subscriber.errors import FoldWorkerError, RewriteConflict
from subscriber.maintenance.fold_worker import MAX_LINE_BYTES, WORKER_COMMAND, FoldWorker
from subscriber.maintenance.rewrites import RewritePlan
from subscriber.store.base import StepOutcome
from tests.waiting import wait_for

PLAN = RewritePlan(7, 9, 10, 3, 1, ("part-a.parquet",), ('{"add": {}}', '{"remove": {}}'))
PLAN_FIELDS = json.loads(json.dumps(dataclasses.asdict(PLAN)))  # the plan as it crosses
# A worker that reads its settings, then answers each request with the line the test gives.
ANSWERING = """
import json, sys
settings = json.loads(sys.stdin.readline())
assert "spark.master" in settings["spark"]
assert settings["hadoop"] == {{"fs.s3a.secret.key": "secret"}}
for line in sys.stdin:
    sys.stdout.write({answer!r} + "\\n")
    sys.stdout.flush()
"""
# A worker that reads its settings and a request, and never answers.
HANGING = "import sys, time\nsys.stdin.readline()\nsys.stdin.readline()\ntime.sleep(600)\n"


def worker(script: str, timeout_s: float = 30.0) -> FoldWorker:
    conf = {"spark.master": "spark://elsewhere:7077"}
    hadoop = {"fs.s3a.secret.key": "secret"}  # on the worker's input, not its command line
    return FoldWorker(conf, timeout_s, command=[sys.executable, "-c", script], hadoop=hadoop)


def answering(answer: str) -> FoldWorker:
    return worker(ANSWERING.format(answer=answer))


def test_a_plan_crosses_as_json_and_back() -> None:
    assert RewritePlan.from_dict(PLAN_FIELDS) == PLAN
    with answering(json.dumps({"plan": PLAN_FIELDS})) as client:
        assert client.plan("/store", 100) == PLAN
        assert client.plan("/store", 100) == PLAN  # the same worker, one fold at a time
        assert client.compaction("/store", 1 << 17, 2) == PLAN  # a compaction's plan, likewise
    with answering('{"plan": {"version": 1}}') as client:
        with pytest.raises(FoldWorkerError, match="nonsense"):
            client.compaction("/store", 1 << 17, 2)
        assert client.pid is None


def _failed_fold(client: FoldWorker) -> None:
    with contextlib.suppress(FoldWorkerError):
        client.plan("/store", 100)


def test_a_checkpoint_is_done_only_when_the_worker_says_so() -> None:
    with answering(json.dumps({"done": True})) as client:
        assert client.checkpoint("/store")
        pid = client.pid
        assert client.checkpoint("/store")
        assert client.pid == pid  # the same worker
    for answer in ('{"plan": {}}', '{"done": "yes"}', "{}"):
        with answering(answer) as client, pytest.raises(FoldWorkerError, match="nonsense"):
            client.checkpoint("/store")
        assert client.pid is None  # stopped: the next step starts another
    with worker(HANGING) as busy:
        folding = threading.Thread(target=lambda: _failed_fold(busy), daemon=True)
        folding.start()
        wait_for(lambda: busy.pid is not None, 30, "the worker's start")
        assert not busy.checkpoint("/store")  # busy with a fold: the store writes it itself
    with answering('{"error": "disk full"}') as client:
        with pytest.raises(FoldWorkerError, match="failed in the fold worker: disk full") as err:
            client.checkpoint("/store")
        assert err.value.retriable


def test_a_vacuum_reports_what_the_worker_says_it_deleted() -> None:
    done = {"files_before": 9, "files_after": 9, "files_deleted": 3, "bytes_reclaimed": 4096}
    with answering(json.dumps({"outcome": done})) as client:
        assert client.vacuum("/store") == StepOutcome(9, 9, 3, 4096)
    hostile = [
        {"outcome": {**done, "files_deleted": -1}},
        {"outcome": {**done, "bytes_reclaimed": 1.5}},
        {"outcome": {**done, "files_after": True}},
        {"outcome": {**done, "extra": 1}},
        {"outcome": {k: v for k, v in done.items() if k != "files_before"}},
        {"outcome": [9, 9, 3, 4096]},
        {"deleted": 3, "bytes": 4096},
        {"done": True},
    ]
    for answer in map(json.dumps, hostile):
        with answering(answer) as client, pytest.raises(FoldWorkerError, match="nonsense"):
            client.vacuum("/store")
        assert client.pid is None  # stopped: the next step starts another


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ([], "exactly the fields"),
        ({**PLAN_FIELDS, "extra": 1}, "exactly the fields"),
        ({k: v for k, v in PLAN_FIELDS.items() if k != "added"}, "exactly the fields"),
        ({**PLAN_FIELDS, "version": -1}, "version is an integer"),
        ({**PLAN_FIELDS, "scopes": True}, "scopes is an integer"),
        ({**PLAN_FIELDS, "checked": 6}, "not before the one it read"),
        ({**PLAN_FIELDS, "checked": None}, "checked is an integer"),
        ({**PLAN_FIELDS, "added": "1"}, "added is an integer"),
        ({**PLAN_FIELDS, "actions": [1]}, "lists of strings"),
        ({**PLAN_FIELDS, "rewritten": "a"}, "lists of strings"),
    ],
)
def test_a_plan_that_is_not_one_is_refused(raw: object, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        RewritePlan.from_dict(raw)


def test_the_worker_gets_a_local_master_whatever_the_store_s_session_has() -> None:
    script = """
import json, os, sys
settings = json.loads(sys.stdin.readline())
sys.stdout.write(json.dumps({"error": settings["spark"]["spark.master"]}) + "\\n")
sys.stdout.flush()
sys.stdin.readline()
"""
    with worker(script) as client, pytest.raises(FoldWorkerError, match=r"local\[1\]") as err:
        client.plan("/store", 100)
    assert err.value.retriable


@pytest.mark.parametrize(
    ("answer", "error", "kind"),
    [
        ("not json", "answered nonsense", FoldWorkerError),
        ('"a string"', "answered nonsense", FoldWorkerError),
        ('{"plan": {"version": 1}}', "answered nonsense", FoldWorkerError),
        ('{"error": "boom"}', "failed in the fold worker: boom", FoldWorkerError),
        (
            '{"error": "version 9 removed x", "conflict": true}',
            "version 9 removed x",
            RewriteConflict,
        ),
    ],
)
def test_a_worker_s_bad_answer_fails_the_fold(
    answer: str, error: str, kind: type[Exception]
) -> None:
    with answering(answer) as client, pytest.raises(kind, match=error):
        client.plan("/store", 100)


def exiting_once(code: int, *, after_the_request: bool) -> str:
    """A worker that, the first time (no marker file yet), exits with ``code`` after reading
    its settings (and the request, if ``after_the_request``); the next one answers PLAN."""
    line = json.dumps({"plan": PLAN_FIELDS})
    return f"""
import os, sys
sys.stdin.readline()
marker = os.environ["SCD_TEST_MARKER"]
if not os.path.exists(marker):
    open(marker, "w").close()
    if {after_the_request}:
        sys.stdin.readline()
    sys.exit({code})
sys.stdin.readline()
sys.stdout.write({line!r} + "\\n")
sys.stdout.flush()
sys.stdin.readline()
"""


def test_a_worker_that_exits_fails_the_fold_and_the_next_fold_starts_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCD_TEST_MARKER", str(tmp_path / "started-once"))
    with worker(exiting_once(3, after_the_request=True)) as client:
        with pytest.raises(FoldWorkerError, match=r"exited \(3\)") as err:
            client.plan("/store", 100)
        assert err.value.retriable
        assert client.pid is None
        assert client.plan("/store", 100) == PLAN  # a new worker
        assert client.pid is not None


def test_a_worker_that_hangs_is_stopped_after_the_timeout() -> None:
    with worker(HANGING, timeout_s=1.0) as client:
        started = time.monotonic()
        with pytest.raises(FoldWorkerError, match="did not answer within 1 s"):
            client.plan("/store", 100)
        assert time.monotonic() - started < 15
        assert client.pid is None  # stopped


def test_a_line_past_the_bound_is_not_read_whole() -> None:
    script = f"""
import sys
sys.stdin.readline()
sys.stdin.readline()
sys.stdout.write("x" * {MAX_LINE_BYTES + 10})
sys.stdout.flush()
sys.stdin.readline()
"""
    with worker(script) as client, pytest.raises(FoldWorkerError, match="line over"):
        client.plan("/store", 100)


def test_a_worker_that_left_idle_as_the_request_went_out_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCD_TEST_MARKER", str(tmp_path / "left-once"))
    with worker(exiting_once(0, after_the_request=False)) as client:  # 0: idle, as a worker
        assert client.plan("/store", 100) == PLAN


def test_the_worker_answers_while_asked_and_exits_when_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker's side (fold_worker.serve), with the fold and its session replaced."""
    from subscriber.maintenance import compaction, delta_table, fold_worker, rewrites

    monkeypatch.setattr(fold_worker, "_session", lambda *_: object())
    monkeypatch.setattr(rewrites, "plan", lambda *_: PLAN)
    compacted = dataclasses.replace(PLAN, scopes=0)
    targets: list[tuple[str, int, int]] = []

    def compaction_plan(_: object, at: str, target: int, least: int) -> RewritePlan:
        targets.append((at, target, least))
        return compacted

    monkeypatch.setattr(compaction, "plan", compaction_plan)
    monkeypatch.setattr(delta_table, "active_session", contextlib.nullcontext)
    checkpointed: list[str] = []
    monkeypatch.setattr(delta_table, "checkpoint", lambda _, at: checkpointed.append(at))
    vacuumed = StepOutcome(9, 9, files_deleted=2, bytes_reclaimed=300)
    vacuumed_at: list[str] = []

    def vacuum(_: object, at: str) -> StepOutcome:
        vacuumed_at.append(at)
        return vacuumed

    monkeypatch.setattr(delta_table, "vacuum", vacuum)
    requests_in, requests_out = os.pipe()
    replies_in, replies_out = os.pipe()
    with (
        os.fdopen(requests_in, "rb", buffering=0) as requests,
        os.fdopen(requests_out, "wb") as ask,
        os.fdopen(replies_out, "wb") as replies,
        os.fdopen(replies_in, "rb") as answers,
    ):
        ask.write(json.dumps({"spark": {}, "hadoop": {}, "idle_s": 1.0}).encode() + b"\n")
        for request in (
            {"op": "fold", "location": "/store", "max_scopes": 5},
            {"op": "checkpoint", "location": "/store"},
            {"op": "compact", "location": "/store", "target_file_bytes": 4096, "min_files": 3},
            {"op": "vacuum", "location": "/store"},
            {"op": "optimize", "location": "/store"},
        ):
            ask.write(json.dumps(request).encode() + b"\n")
        ask.flush()
        serving = threading.Thread(target=fold_worker.serve, args=(requests, replies))
        started = time.monotonic()
        serving.start()
        assert json.loads(answers.readline()) == {"plan": PLAN_FIELDS}
        assert json.loads(answers.readline()) == {"done": True}
        assert checkpointed == ["/store"]
        assert json.loads(answers.readline()) == {"plan": {**PLAN_FIELDS, "scopes": 0}}
        assert targets == [("/store", 4096, 3)]
        assert json.loads(answers.readline()) == {"outcome": dataclasses.asdict(vacuumed)}
        assert vacuumed_at == ["/store"]
        assert json.loads(answers.readline()) == {"error": "no such step: 'optimize'"}
        serving.join(10)
        assert not serving.is_alive(), "the idle worker did not exit"
        assert 1.0 <= time.monotonic() - started < 10


def test_a_closed_worker_folds_nothing() -> None:
    client = answering("{}")
    client.close()
    with pytest.raises(FoldWorkerError, match="closed"):
        client.plan("/store", 100)


def test_the_worker_exits_at_the_end_of_its_input() -> None:
    """What happens when the subscriber dies: its pipe closes, and the worker ends."""
    process = subprocess.Popen(WORKER_COMMAND, stdin=subprocess.PIPE)
    assert process.stdin is not None
    process.stdin.close()
    assert process.wait(60) == 0
