"""The embedded backend's leader election: an exclusive flock beside the database."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from journal.sqlite.leadership import FileLockLeadership
from runtime.clock import Wait, wait_on
from tests.waiting import wait_for

RETRY_S = 0.02
# Refused lock attempts a member must have made before a test says it did not take the lead.
REFUSED_ATTEMPTS = 3


def counting_wait(refused: threading.Event) -> Wait:
    """The retry wait of a member, setting ``refused`` once it retried REFUSED_ATTEMPTS times:
    the test then knows the lock was tried and refused, without sleeping."""
    count = [0]

    def wait(event: threading.Event, timeout_s: float) -> bool:
        count[0] += 1
        if count[0] >= REFUSED_ATTEMPTS:
            refused.set()
        return wait_on(event, timeout_s)

    return wait


def test_exactly_one_holder_and_takeover_on_stop(tmp_path: Path) -> None:
    path = tmp_path / "journal.db.publish.leader.lock"
    changes: list[tuple[str, bool]] = []
    one = FileLockLeadership(path, RETRY_S, "publisher-leader").start(
        lambda v: changes.append(("one", v))
    )
    wait_for(lambda: one.is_leader)
    refused = threading.Event()
    two = FileLockLeadership(path, RETRY_S, "publisher-leader", counting_wait(refused)).start(
        lambda v: changes.append(("two", v))
    )
    assert refused.wait(10), "the second member never retried the lock"
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
        refused = threading.Event()
        follower = FileLockLeadership(
            path, RETRY_S, "publisher-leader", counting_wait(refused)
        ).start()
        assert refused.wait(10), "the follower never retried the lock"
        assert not follower.is_leader
        holder.kill()
        wait_for(lambda: follower.is_leader, what="takeover after kill")
        follower.stop()
    finally:
        holder.kill()
        holder.wait()
