"""The embedded backend's leader election: an exclusive flock beside the database."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from journal.sqlite.leadership import FileLockLeadership
from tests.waiting import wait_for

RETRY_S = 0.02


def test_exactly_one_holder_and_takeover_on_stop(tmp_path: Path) -> None:
    path = tmp_path / "journal.db.publish.leader.lock"
    changes: list[tuple[str, bool]] = []
    one = FileLockLeadership(path, RETRY_S, "publisher-leader").start(
        lambda v: changes.append(("one", v))
    )
    wait_for(lambda: one.is_leader)
    two = FileLockLeadership(path, RETRY_S, "publisher-leader").start(
        lambda v: changes.append(("two", v))
    )
    time.sleep(0.2)
    assert one.is_leader
    assert not two.is_leader
    one.stop()
    wait_for(lambda: two.is_leader)
    two.stop()
    assert changes == [("one", True), ("one", False), ("two", True), ("two", False)]


def test_lock_is_released_when_the_holding_process_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(path)!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('locked', flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        follower = FileLockLeadership(path, RETRY_S, "publisher-leader").start()
        time.sleep(0.2)
        assert not follower.is_leader
        holder.kill()
        wait_for(lambda: follower.is_leader, what="takeover after kill")
        follower.stop()
    finally:
        holder.kill()
        holder.wait()
