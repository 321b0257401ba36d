"""deploy/common.sh's launcher, on plain `sleep` processes (no services): scd_launch puts a
daemon in its own session with its pid recorded and its exit status written when it ends;
scd_wait_ready notices an exit; scd_stop escalates to SIGKILL of the whole process group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import services
from tests.cluster_script import group_members
from tests.waiting import wait_for

COMMON_SH = services.DEPLOY_DIR / "common.sh"
SCRIPT_TIMEOUT_S = 60.0


def bash(script: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``script`` run by bash after sourcing common.sh, in ``tmp_path``."""
    return subprocess.run(
        ["bash", "-c", f"set -euo pipefail; source {COMMON_SH}; {script}"],
        env={**os.environ, "SCD_HOME": str(tmp_path / "home")},
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
        check=False,
    )


@pytest.fixture
def pidfile(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "run" / "sleeper.pid"
    try:
        yield path
    finally:
        if path.exists():  # leave nothing running
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(path.read_text()), signal.SIGKILL)


def exit_status(pidfile: Path) -> int | None:
    try:
        return int(pidfile.with_suffix(".exit").read_text())
    except (OSError, ValueError):
        return None


def test_launch_records_pid_session_and_exit_status(tmp_path: Path, pidfile: Path) -> None:
    log = tmp_path / "logs" / "sleeper.log"
    done = bash(f"scd_launch {pidfile} {log} sleeper sleep 300", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "started sleeper (pid" in done.stderr
    pid = int(pidfile.read_text())
    assert os.getsid(pid) == pid, "not in a session of its own"
    assert os.getpgid(pid) == pid
    assert "starting sleeper" in log.read_text()
    assert exit_status(pidfile) is None
    os.kill(pid, signal.SIGTERM)
    assert wait_for(lambda: exit_status(pidfile) is not None, 10, "the exit status")
    assert exit_status(pidfile) == 128 + signal.SIGTERM

    done = bash(f"scd_launch {pidfile} {log} sleeper sh -c 'exit 7'", tmp_path)
    assert done.returncode == 0, done.stderr
    assert wait_for(lambda: exit_status(pidfile) is not None, 10, "the exit status")
    assert exit_status(pidfile) == 7


def test_wait_ready_fails_as_soon_as_the_process_exits(tmp_path: Path, pidfile: Path) -> None:
    log = tmp_path / "sleeper.log"
    done = bash(
        f"scd_launch {pidfile} {log} sleeper sh -c 'echo broken; exit 1'; "
        f'rc=0; scd_wait_ready sleeper "$(<{pidfile})" 30 {log} false || rc=$?; echo "rc=$rc"',
        tmp_path,
    )
    assert done.stdout.strip() == "rc=2", done.stdout + done.stderr
    assert "sleeper exited during startup" in done.stderr
    assert "broken" in done.stderr, "the end of the log is shown"
    done = bash(
        f"scd_launch {pidfile} {log} sleeper sleep 300; "
        f'rc=0; scd_wait_ready sleeper "$(<{pidfile})" 1 {log} false || rc=$?; echo "rc=$rc"; '
        f'scd_wait_ready sleeper "$(<{pidfile})" 1 {log} true && echo ready',
        tmp_path,
    )
    assert done.stdout.split() == ["rc=1", "ready"], done.stdout + done.stderr


def test_stop_kills_the_group_of_a_daemon_that_ignores_sigterm(
    tmp_path: Path, pidfile: Path
) -> None:
    log = tmp_path / "sleeper.log"
    # A daemon that ignores SIGTERM, with a child (like a Spark JVM) in its process group.
    daemon = "sh -c 'trap \"\" TERM; sleep 300 & sleep 300; wait'"
    done = bash(f"scd_launch {pidfile} {log} sleeper {daemon}", tmp_path)
    assert done.returncode == 0, done.stderr
    pid = int(pidfile.read_text())
    wait_for(lambda: len(group_members({pid})) >= 2, 10, "the daemon's child")
    done = bash(f"scd_stop sleeper {pidfile} 'sh -c' 1", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "did not exit within 1s of SIGTERM; sending SIGKILL" in done.stderr
    assert group_members({pid}) == []
    assert not pidfile.exists()
    assert exit_status(pidfile) is None, "a stopped daemon shows no exit status"
    again = bash(f"scd_stop sleeper {pidfile} 'sh -c' 1", tmp_path)
    assert again.returncode == 0
    assert "sleeper is not running" in again.stderr


def test_log_has_finds_text_followed_by_more_than_a_pipe_holds(tmp_path: Path) -> None:
    """The readiness check of a start: the text after the log's first BYTES, however much the
    daemon logged after it (a check that stopped reading at the match failed under pipefail
    once over 64 KiB followed it)."""
    log = tmp_path / "daemon.log"
    before = "an earlier start: started\n"
    log.write_text(before + "started\n" + "refreshing topics took 9 ms\n" * 20_000)
    assert log.stat().st_size > 8 * 65536
    assert bash(f"scd_log_has {log} {len(before)} started", tmp_path).returncode == 0
    # Only what came before the offset says it: not this start's.
    assert bash(f"scd_log_has {log} {len(before)} earlier", tmp_path).returncode != 0
    assert bash(f"scd_log_has {tmp_path / 'missing.log'} 0 started", tmp_path).returncode != 0
