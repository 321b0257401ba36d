"""The subscriber daemon waits for an unreachable journal with a clear log line, stops
cleanly on SIGTERM while waiting, and refuses bad settings with the variable's name (a bad
agents file with the file, the agent and the rule; an unknown import hook with its name)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from subscriber.daemon import _stop_all
from tests.services import free_port


def refused_start(settings: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``scd subscriber`` with ``settings`` added to the environment, expected to stop at once."""
    return subprocess.run(
        [sys.executable, "-m", "scd", "subscriber"],
        env={**os.environ, **settings},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_waits_for_kafka_and_stops_on_sigterm(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "SCD_JOURNAL_BACKEND": "kafka",
        "SCD_JOURNAL_BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}",
        "SCD_JOURNAL_REQUEST_TIMEOUT_S": "0.2",
        "SCD_SUBSCRIBER_STORE_PATH": str(tmp_path / "store"),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "scd", "subscriber"], env=env, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    line = ""
    while "waiting for the journal" not in line:
        assert time.monotonic() < deadline, "no waiting line"
        line = proc.stderr.readline()
    assert "127.0.0.1" in line  # names what it waits for
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0


def test_bad_setting_is_named() -> None:
    run = refused_start({"SCD_SUBSCRIBER_MAX_RETRIES": "many"})
    assert run.returncode == 2
    assert "max_retries" in run.stderr.lower()


def test_an_unknown_import_hook_stops_the_start_with_exit_2() -> None:
    run = refused_start({"SCD_SUBSCRIBER_IMPORT_HOOKS": "invalidate,flush_cdn"})
    assert run.returncode == 2
    assert "SCD_SUBSCRIBER_IMPORT_HOOKS names 'flush_cdn'" in run.stderr


def test_a_bad_agents_file_stops_the_start_with_exit_2(tmp_path: Path) -> None:
    agents = tmp_path / "agents.toml"
    agents.write_text('[[agent]]\nname = "a"\nstore_path = "/a"\n[[agent]]\nname = "a"\n')
    run = refused_start({"SCD_SUBSCRIBER_AGENTS_FILE": str(agents)})
    assert run.returncode == 2
    assert f"agents file {agents}: agent #2: name a is agent #1's already" in run.stderr


class FoldingAgent:
    """An agent whose stop waits for the fold its maintenance thread runs in the worker, as
    ``SubscriberAgent.stop`` waits for a maintenance step."""

    name = "folding"

    def __init__(self, fold_done: threading.Event) -> None:
        self.fold_done = fold_done
        self.waited_s = -1.0

    def stop(self) -> None:
        started = time.monotonic()
        self.fold_done.wait(FOLD_S)
        self.waited_s = time.monotonic() - started


class Worker:
    def __init__(self, fold_done: threading.Event) -> None:
        self.fold_done = fold_done

    def close(self) -> None:
        self.fold_done.set()  # the fold in progress fails at once


FOLD_S = 30.0  # a fold of a big store, which a SIGTERM must not wait for


def test_a_stop_does_not_wait_for_a_fold_in_the_worker() -> None:
    fold_done = threading.Event()
    agents = [FoldingAgent(fold_done), FoldingAgent(fold_done)]
    started = time.monotonic()
    _stop_all(agents, Worker(fold_done))  # type: ignore[arg-type]
    assert time.monotonic() - started < FOLD_S / 2
    assert all(0 <= a.waited_s < FOLD_S / 2 for a in agents)
