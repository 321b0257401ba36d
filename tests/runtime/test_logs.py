"""JSON log lines carry the structured fields passed with extra=; SIGUSR1 dumps stacks."""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import subprocess
import sys
import time
from typing import IO

from runtime.logs import JsonFormatter

STACK_DUMP_MARKERS = ("parked_worker", "Current thread", "in <module>")


def test_json_lines_carry_extras() -> None:
    record = logging.makeLogRecord(
        {"name": "subscriber.agent", "levelname": "INFO", "msg": "committed %d", "args": (7,)}
    )
    record.agent = "sub-1"
    record.offset = 7
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "committed 7"
    assert line["agent"] == "sub-1"
    assert line["offset"] == 7
    assert line["logger"] == "subscriber.agent"
    assert line["level"] == "INFO"


def test_sigusr1_writes_every_thread_stack_and_the_process_goes_on() -> None:
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, threading, time\n"
            "from runtime.logs import enable_stack_dumps\n"
            "enable_stack_dumps()\n"
            "def parked_worker(): time.sleep(60)\n"
            "threading.Thread(target=parked_worker, daemon=True).start()\n"
            "print('ready', flush=True)\n"
            "line = sys.stdin.readline()\n"
            "print('still running:', line.strip(), flush=True)\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdin is not None
    try:
        assert child.stdout.readline().strip() == "ready"
        child.send_signal(signal.SIGUSR1)
        dump = read_until(child.stderr, STACK_DUMP_MARKERS, timeout_s=10)
        child.stdin.write("yes\n")
        child.stdin.flush()
        out, rest = child.communicate(timeout=10)
    finally:
        child.kill()
    err = dump + rest
    assert out.strip() == "still running: yes"
    assert "parked_worker" in err, err
    assert "Current thread" in err, err
    assert "in <module>" in err, err


def read_until(stream: IO[str] | None, markers: tuple[str, ...], timeout_s: float) -> str:
    """What a child wrote to ``stream`` until every marker appeared (or ``timeout_s`` passed)."""
    assert stream is not None
    fd = stream.fileno()  # unbuffered reads: select sees only what the buffer has not taken
    data = b""
    deadline = time.monotonic() + timeout_s
    while not all(marker.encode() in data for marker in markers):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    return data.decode()
