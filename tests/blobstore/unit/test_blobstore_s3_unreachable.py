"""An S3 store whose server cannot be reached fails fast with a retriable error naming the
endpoint and bucket: refused connections, dropped connection attempts, a server that never
answers. No S3 server needed: the failures are staged with local sockets."""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from blobstore import BlobStoreSettings, BlobStoreUnavailable, open_blob_store
from blobstore.settings import DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_MAX_ATTEMPTS
from tests.contract.blobstore_contract import EVERY_CALL
from tests.services import free_port

BUCKET = "unreachable-bucket"

# Small timeouts for the staged hangs: the test proves they are honoured, not their defaults.
STAGED_TIMEOUT_S = 0.1
STAGED_ATTEMPTS = 2

# Slack for scheduling and back-off between attempts on a loaded machine.
SLACK_S = 3.0

# botocore sends bodies with "Expect: 100-continue" and waits up to this long for the answer
# before sending the body anyway, so each attempt of a write waits this much more.
EXPECT_CONTINUE_WAIT_S = 1.0

# A refused connection is retried without waiting for a timeout: it fails at once.
REFUSED_BOUND_S = 2.0


def settings(endpoint: str, **overrides: Any) -> BlobStoreSettings:
    values: dict[str, Any] = {
        "backend": "s3",
        "endpoint_url": endpoint,
        "bucket": BUCKET,
        "access_key": "k",
        "secret_key": "s",
        **overrides,
    }
    return BlobStoreSettings(**values)


@pytest.fixture
def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    return free_port()


@pytest.fixture
def unanswered_port() -> Iterator[int]:
    """A port whose accept queue is full: new connection attempts are dropped, unanswered,
    like packets to a host that is down."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port: int = server.getsockname()[1]
        fillers = []
        for _ in range(3):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        # A filler connected fills the queue; the attempts after it are not answered.
        _, connected, _ = select.select([], fillers, [], 5.0)
        assert connected, "no connection to fill the accept queue"
        yield port
        for filler in fillers:
            filler.close()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers a request."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield server.getsockname()[1]


def assert_unavailable(call: str, endpoint: str, bound_s: float, **overrides: Any) -> None:
    store = open_blob_store(settings(endpoint, **overrides))
    started = time.monotonic()
    with pytest.raises(BlobStoreUnavailable) as raised:
        EVERY_CALL[call](store)
    elapsed = time.monotonic() - started
    assert endpoint in str(raised.value)
    assert BUCKET in str(raised.value)
    assert raised.value.retriable
    assert elapsed < bound_s, f"{call} took {elapsed:.1f}s to fail"


@pytest.mark.parametrize("call", sorted(EVERY_CALL))
def test_closed_port_fails_at_once(closed_port: int, call: str) -> None:
    assert_unavailable(call, f"http://127.0.0.1:{closed_port}", REFUSED_BOUND_S)


@pytest.mark.parametrize("call", ["head", "put_bytes", "get_bytes"])
def test_dropped_connection_attempts_fail_after_connect_timeout(
    unanswered_port: int, call: str
) -> None:
    assert_unavailable(
        call,
        f"http://127.0.0.1:{unanswered_port}",
        STAGED_TIMEOUT_S * STAGED_ATTEMPTS + SLACK_S,
        connect_timeout_s=STAGED_TIMEOUT_S,
        max_attempts=STAGED_ATTEMPTS,
    )


@pytest.mark.parametrize("call", ["head", "put_bytes", "get_bytes", "list"])
def test_server_that_never_answers_fails_after_read_timeout(silent_port: int, call: str) -> None:
    assert_unavailable(
        call,
        f"http://127.0.0.1:{silent_port}",
        (STAGED_TIMEOUT_S + EXPECT_CONTINUE_WAIT_S) * STAGED_ATTEMPTS + SLACK_S,
        read_timeout_s=STAGED_TIMEOUT_S,
        max_attempts=STAGED_ATTEMPTS,
    )


@pytest.mark.slow
def test_default_settings_give_up_on_a_dead_host_within_seconds(unanswered_port: int) -> None:
    assert_unavailable(
        "head",
        f"http://127.0.0.1:{unanswered_port}",
        DEFAULT_CONNECT_TIMEOUT_S * DEFAULT_MAX_ATTEMPTS + SLACK_S,
    )


def test_opening_with_create_bucket_fails_at_once(closed_port: int) -> None:
    endpoint = f"http://127.0.0.1:{closed_port}"
    with pytest.raises(BlobStoreUnavailable, match=endpoint):
        open_blob_store(settings(endpoint, create_bucket=True))
