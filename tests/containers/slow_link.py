"""A slow, lossy link without ``tc netem``: packets leaving an interface go through an NFQUEUE
and are let out after a random delay, or dropped.

Some kernels (these VMs among them) are built without ``CONFIG_NET_SCH_NETEM``, but with
NFQUEUE. This module is both the daemon and its launcher:

    python slow_link.py --queue 7 --delay-ms 200 --jitter-ms 50 --loss 0.02

run inside a network namespace (``nsenter -t PID -n``) after an nftables rule sends the
interface's outgoing packets to queue 7 (``queue num 7 bypass``: packets pass unharmed when no
daemon listens, so a crashed daemon never partitions the host). It speaks the nfnetlink queue
protocol directly over a netlink socket (no C library needed), holds each packet's verdict for
``delay +- jitter`` (uniform, as netem's default distribution; packets may overtake each other,
as with netem's jitter) and drops ``loss`` of them. It prints counts on SIGTERM.
"""

from __future__ import annotations

import argparse
import heapq
import random
import signal
import socket
import struct
import sys
import threading
import time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
NF_DROP = 0
NF_ACCEPT = 1
# Packets held at once: 200 ms of a busy link, with room to spare.
QUEUE_MAXLEN = 20_000


def _attr(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * (-length % 4)


def _message(kind: int, queue: int, attrs: bytes, seq: int) -> bytes:
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + attrs
    return (
        struct.pack(
            "=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | kind, NLM_F_REQUEST, seq, 0
        )
        + body
    )


def _attrs(data: bytes) -> dict[int, bytes]:
    found: dict[int, bytes] = {}
    at = 0
    while at + 4 <= len(data):
        length, kind = struct.unpack_from("=HH", data, at)
        if length < 4:
            break
        found[kind & 0x7FFF] = data[at + 4 : at + length]
        at += (length + 3) & ~3
    return found


class SlowLink:
    def __init__(self, queue: int, delay_s: float, jitter_s: float, loss: float) -> None:
        self.queue = queue
        self.delay_s = delay_s
        self.jitter_s = jitter_s
        self.loss = loss
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.bind((0, 0))
        self.send_lock = threading.Lock()
        self.due: list[tuple[float, int]] = []
        self.due_changed = threading.Condition()
        self.passed = 0
        self.dropped = 0
        self.seq = 0

    def _send(self, kind: int, attrs: bytes) -> None:
        with self.send_lock:
            self.seq += 1
            self.sock.send(_message(kind, self.queue, attrs, self.seq))

    def bind(self) -> None:
        self._send(
            NFQNL_MSG_CONFIG, _attr(NFQA_CFG_CMD, struct.pack("!BBH", NFQNL_CFG_CMD_BIND, 0, 0))
        )
        # Metadata only: the verdict needs the packet id, not its bytes.
        self._send(NFQNL_MSG_CONFIG, _attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META)))
        self._send(NFQNL_MSG_CONFIG, _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", QUEUE_MAXLEN)))

    def _verdict(self, packet_id: int, verdict: int) -> None:
        self._send(
            NFQNL_MSG_VERDICT, _attr(NFQA_VERDICT_HDR, struct.pack("!II", verdict, packet_id))
        )

    def release(self) -> None:
        """Lets each held packet out when its time comes."""
        while True:
            with self.due_changed:
                while not self.due:
                    self.due_changed.wait()
                at, packet_id = self.due[0]
                wait = at - time.monotonic()
                if wait > 0:
                    self.due_changed.wait(wait)
                    continue
                heapq.heappop(self.due)
            self._verdict(packet_id, NF_ACCEPT)
            self.passed += 1

    def receive(self) -> None:
        while True:
            data = self.sock.recv(1 << 16)
            at = 0
            while at + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, at)
                if length < 16:
                    break
                if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
                    header = _attrs(data[at + 20 : at + length]).get(NFQA_PACKET_HDR)
                    if header is not None:
                        self._hold(struct.unpack_from("!I", header)[0])
                elif kind == NLMSG_ERROR:
                    (code,) = struct.unpack_from("=i", data, at + 16)
                    if code != 0:
                        raise OSError(-code, "nfnetlink queue refused a request")
                at += (length + 3) & ~3

    def _hold(self, packet_id: int) -> None:
        if random.random() < self.loss:
            self._verdict(packet_id, NF_DROP)
            self.dropped += 1
            return
        delay = max(0.0, self.delay_s + random.uniform(-self.jitter_s, self.jitter_s))
        with self.due_changed:
            heapq.heappush(self.due, (time.monotonic() + delay, packet_id))
            self.due_changed.notify()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queue", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, required=True)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--loss", type=float, default=0.0, help="fraction dropped, 0..1")
    args = parser.parse_args()
    link = SlowLink(args.queue, args.delay_ms / 1000, args.jitter_ms / 1000, args.loss)

    def report(_signum: int, _frame: object) -> None:
        print(f"passed={link.passed} dropped={link.dropped}", flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, report)
    link.bind()
    threading.Thread(target=link.release, name="release", daemon=True).start()
    print("ready", flush=True)
    link.receive()
    return 0


if __name__ == "__main__":
    sys.exit(main())
