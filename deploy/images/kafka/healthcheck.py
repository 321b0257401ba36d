"""Health check of the scd Kafka image: one ApiVersions round trip (the broker accepts client
requests), without starting a JVM every few seconds.

    python3 healthcheck.py HOST:PORT     exit 0 when the broker answers without an error
"""

from __future__ import annotations

import socket
import struct
import sys

API_VERSIONS = 18
CORRELATION_ID = 1
CLIENT_ID = b"scd-healthcheck"
TIMEOUT_S = 3.0


def read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


def main() -> None:
    host, _, port = sys.argv[1].rpartition(":")
    # Request header v1 (api key, version 0, correlation id, client id); ApiVersions v0 has
    # no body.
    request = struct.pack(">hhih", API_VERSIONS, 0, CORRELATION_ID, len(CLIENT_ID)) + CLIENT_ID
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        (size,) = struct.unpack(">i", read_exactly(sock, 4))
        correlation_id, error_code = struct.unpack(">ih", read_exactly(sock, size)[:6])
    if correlation_id != CORRELATION_ID or error_code != 0:
        sys.exit(f"ApiVersions answered correlation id {correlation_id}, error {error_code}")


if __name__ == "__main__":
    main()
