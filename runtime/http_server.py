"""Serve an ASGI application (FastAPI) with uvicorn in a background thread.

Used by the subscriber's health endpoint and the embedded demo's publisher API. The socket is
bound before the thread starts, so a port in use fails ``start()`` at once and port 0 (any
free port) is known right away. uvicorn installs signal handlers only in the main thread, so
the process keeps its own SIGTERM handling.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from types import TracebackType
from typing import Any, Self

import uvicorn

from runtime.errors import ServerError

log = logging.getLogger(__name__)

# Loopback by default: an endpoint without authentication should not be reachable from the
# network by accident.
DEFAULT_HOST = "127.0.0.1"
# Probes and scrapes come a few at a time; a short accept queue is plenty.
LISTEN_BACKLOG = 64
# uvicorn starts in milliseconds; 10 s leaves room for a loaded 2-core machine.
STARTUP_TIMEOUT_S = 10.0
# How often start() looks whether the server thread is up.
STARTUP_POLL_S = 0.01
# Requests in flight get this long to finish on stop(); probes answer in milliseconds.
SHUTDOWN_GRACE_S = 5.0


class AppServer:
    """Serves ``app`` on ``host:port`` (port 0 = any free port) in a thread."""

    def __init__(
        self,
        app: Any,
        *,
        host: str = DEFAULT_HOST,
        port: int = 0,
        name: str = "http",
        send_buffer_bytes: int | None = None,
    ) -> None:
        """``send_buffer_bytes``: the kernel's send buffer of each connection (None: the
        kernel's autotuning, up to megabytes a connection)."""
        self.host = host
        self.name = name
        self.send_buffer_bytes = send_buffer_bytes
        self._requested_port = port
        self._port: int | None = None
        config = uvicorn.Config(
            app,
            log_config=None,  # the process configures logging, not this library
            access_log=False,  # probes every few seconds would drown the log
            lifespan="off",
            timeout_graceful_shutdown=int(SHUTDOWN_GRACE_S),
        )
        self._server = uvicorn.Server(config)
        self._socket: socket.socket | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (after start())."""
        if self._port is None:
            raise RuntimeError("server not started")
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        # IPPROTO_TCP named: asyncio turns Nagle off (TCP_NODELAY) only on connections of a
        # socket that says so, and with Nagle each answer waited for the client's delayed ACK
        # (about 45 ms per request, against under 1 ms).
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if self.send_buffer_bytes is not None:  # accepted connections inherit it
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
            sock.bind((self.host, self._requested_port))
            sock.listen(LISTEN_BACKLOG)
        except OSError as exc:
            sock.close()
            raise ServerError(
                f"{self.name} cannot listen on {self.host}:{self._requested_port}: {exc}"
            ) from exc
        self._socket = sock
        self._port = int(sock.getsockname()[1])
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [sock]},
            name=f"scd-{self.name}-{self._port}",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise ServerError(f"{self.name} on {self.url} did not start")
            time.sleep(STARTUP_POLL_S)
        log.info("%s listening on %s", self.name, self.url)

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(SHUTDOWN_GRACE_S + STARTUP_TIMEOUT_S)
            if self._thread.is_alive():
                log.warning("%s on %s did not stop in time", self.name, self.url)
            self._thread = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
