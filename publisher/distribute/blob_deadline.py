"""Blob store calls of a distribute request that answer within a deadline, whatever the server
does.

botocore bounds each attempt (connect and read timeouts) but not a call: an S3 server that
accepts connections and then answers nothing (frozen, paused) holds a request for attempts x
read timeout, 90 s and more with the defaults, and a multipart upload once per part. A REST
client must get its answer sooner, so the calls that a distribute request makes (storing
binaries by reference, spilling the package, reading what is already there) run in a small
pool and the request waits for each at most ``timeout_s``: then it fails with
BlobStoreUnavailable (503, retry later).

What an abandoned call leaves is what a failed send already leaves: an object nobody
references (a content-addressed binary, harmless; or a spilled package without an offset
stamp, which the leader's cleanup stamps and deletes, publisher/distribute/cleanup.py). The call
itself ends by botocore's own timeouts; a call still queued when its deadline passed never starts,
so a frozen server holds at most ``workers`` threads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AbstractContextManager
from typing import BinaryIO, TypeVar

from blobstore import BlobInfo, BlobStore, BlobStoreUnavailable

log = logging.getLogger(__name__)

T = TypeVar("T")

# Calls in flight at once: request threads waiting on the blob store. Beyond it calls queue
# (and give up at their deadline without starting).
DEFAULT_WORKERS = 16


class DeadlineBlobStore(BlobStore):
    """``blobs`` whose put, head and set_metadata (and so put_bytes, exists and
    put_content_addressed) answer within ``timeout_s``; reads and listings go straight
    through (the cleanup and the API's readers have their own patience)."""

    def __init__(
        self,
        blobs: BlobStore,
        timeout_s: float,
        workers: int = DEFAULT_WORKERS,
        *,
        pool: ThreadPoolExecutor | None = None,
    ) -> None:
        self.blobs = blobs
        self.timeout_s = timeout_s
        self._pool = pool or ThreadPoolExecutor(workers, thread_name_prefix="blob-call")

    def within(self, timeout_s: float) -> DeadlineBlobStore:
        """The same store and pool with another deadline (say, a shorter one for calls whose
        outcome the answer does not depend on)."""
        return DeadlineBlobStore(self.blobs, timeout_s, pool=self._pool)

    def call(self, what: str, fn: Callable[[], T], timeout_s: float | None = None) -> T:
        """``fn()``'s result, or BlobStoreUnavailable once ``timeout_s`` (default: the
        store's) passed without one."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        future = self._pool.submit(fn)
        try:
            return future.result(timeout)
        except FutureTimeout:
            if not future.cancel():  # running: let it end by itself, and say how it ended
                future.add_done_callback(lambda f: _log_late(what, f.exception()))
            raise BlobStoreUnavailable(
                str(getattr(self.blobs, "endpoint", type(self.blobs).__name__)),
                str(getattr(self.blobs, "bucket", "-")),
                f"no answer to {what} within {timeout:g} s",
            ) from None

    # ------------------------------------------------------------------ bounded calls
    def put(
        self,
        key: str,
        stream: BinaryIO,
        length: int,
        *,
        metadata: Mapping[str, str] | None = None,
        content_type: str | None = None,
    ) -> BlobInfo:
        return self.call(
            f"store {key}",
            lambda: self.blobs.put(
                key, stream, length, metadata=metadata, content_type=content_type
            ),
        )

    def head(self, key: str) -> BlobInfo:
        return self.call(f"describe {key}", lambda: self.blobs.head(key))

    def set_metadata(self, key: str, metadata: Mapping[str, str]) -> BlobInfo:
        return self.call(f"update {key}", lambda: self.blobs.set_metadata(key, metadata))

    # ------------------------------------------------------------------ straight through
    def get(self, key: str) -> AbstractContextManager[BinaryIO]:
        return self.blobs.get(key)

    def delete(self, key: str) -> None:
        self.blobs.delete(key)

    def list(self, prefix: str = "") -> Iterator[BlobInfo]:
        return self.blobs.list(prefix)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _log_late(what: str, error: BaseException | None) -> None:
    if error is None:
        log.info("blob store call %s finished after its request had given up", what)
    else:
        log.warning("blob store call %s failed after its request had given up: %s", what, error)
