"""The writer lease of a content store: which subscriber process may write it.

A store is written by one process at a time. The lease is one small JSON object next to the
table (``<store>/_scd_writer/lease.json``; VACUUM leaves names starting with ``_`` alone), read
and replaced only by compare-and-swap, so that two processes can never both believe they
replaced the same version:

* on S3 (``s3a://`` and ``s3://`` stores, subscriber.writer.location) with conditional PUTs:
  ``If-None-Match: *`` creates it, ``If-Match: <etag>`` replaces the version read (412 when
  another process replaced it first). A lock file would not do: S3 has no locks, and other
  hosts share the bucket;
* on a local path with ``flock`` around read-compare-replace (``os.replace``), for processes on
  one host (or a file system with working POSIX locks); for a store on another object store
  only when the operator vouches for one host (``SCD_SUBSCRIBER_SINGLE_HOST_LEASE_DIR``: the
  lease lies there), else the daemon refuses the store.

It is not a row of the Delta table: Delta's S3 log store does not make two processes' commits
of one version exclusive, so a lease written by Delta commits would not be either.

Timing (``ttl_s``, ``renew_s``): the holder rewrites the lease every ``renew_s``. A standby
reads it every ``renew_s`` and takes over once it saw the same version unchanged for ``ttl_s``
of its own clock (never by comparing wall clocks of two hosts), or at once when the holder
released it on a clean stop. The holder counts its lease valid until ``ttl_s - renew_s``
after the start of its last successful renewal, so it stops writing before any standby can
have taken over. After the holder dies a standby takes over within ``ttl_s + 2 * renew_s``
(12 s + 4 s with the defaults).

Every takeover increments the lease's ``epoch``; the new holder claims the store with it
(``Store.claim``), which fences out commits of earlier holders inside Delta's commit
(subscriber.store.delta).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from blobstore.settings import BlobStoreSettings
from runtime.errors import ConfigError
from subscriber.errors import LeaseError, NotALease, StorePathError
from subscriber.writer.location import (
    ForeignStore,
    LocalStore,
    S3Store,
    StoreLocation,
    refusal,
    store_location,
)

if TYPE_CHECKING:
    from types_boto3_s3.client import S3Client

log = logging.getLogger(__name__)

LEASE_DIR = "_scd_writer"
LEASE_NAME = "lease.json"
# S3 attempts per lease read or write: a renewal that cannot reach S3 fails fast and is tried
# again on the next renew period rather than held up by retries.
LEASE_S3_ATTEMPTS = 2
# A lease object larger than this is not ours: refused instead of parsed.
MAX_LEASE_BYTES = 4096


@dataclass(frozen=True)
class LeaseRecord:
    owner: str  # "" once released
    epoch: int
    renewals: int  # grows with every renewal, so each one is a new version
    ttl_s: float

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes) -> LeaseRecord:
        if len(data) > MAX_LEASE_BYTES:
            raise NotALease(f"lease object of {len(data)} bytes: not a writer lease")
        try:
            raw = json.loads(data)
            return cls(
                str(raw["owner"]), int(raw["epoch"]), int(raw["renewals"]), float(raw["ttl_s"])
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise NotALease(f"unreadable writer lease: {exc}") from exc


class LeaseObject(Protocol):
    """One object replaced by compare-and-swap; a version is named by an opaque token."""

    where: str

    def read(self) -> tuple[LeaseRecord, str] | None:
        """The record and its version token; None when there is none."""

    def swap(self, record: LeaseRecord, expected: str | None) -> str | None:
        """Write ``record`` if the object is still at version ``expected`` (None: absent);
        the new token, or None when another process changed it first."""


class LocalLeaseObject:
    """The lease as a file; ``flock`` on a lock file beside it makes read-compare-replace one
    step for every process of the host."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LEASE_NAME
        self.where = str(self.path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with (self.path.parent / f"{LEASE_NAME}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _current(self) -> tuple[LeaseRecord, str] | None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        return LeaseRecord.decode(data), hashlib.sha256(data).hexdigest()

    def read(self) -> tuple[LeaseRecord, str] | None:
        with self._locked():
            return self._current()

    def swap(self, record: LeaseRecord, expected: str | None) -> str | None:
        with self._locked():
            current = self._current()
            if (current[1] if current else None) != expected:
                return None
            data = record.encode()
            temporary = self.path.with_name(f"{LEASE_NAME}.{uuid.uuid4().hex}.tmp")
            temporary.write_bytes(data)
            os.replace(temporary, self.path)
            return hashlib.sha256(data).hexdigest()


class S3LeaseObject:
    """The lease as an S3 object, replaced with conditional PUTs (If-Match / If-None-Match)."""

    def __init__(self, client: S3Client, bucket: str, key: str) -> None:
        self.client, self.bucket, self.key = client, bucket, key
        self.where = f"s3a://{bucket}/{key}"

    def read(self) -> tuple[LeaseRecord, str] | None:
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self.key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise LeaseError(f"reading the writer lease {self.where} failed: {exc}") from exc
        except BotoCoreError as exc:  # unreachable, timed out
            raise LeaseError(f"reading the writer lease {self.where} failed: {exc}") from exc
        data = answer["Body"].read(MAX_LEASE_BYTES + 1)
        return LeaseRecord.decode(data), answer["ETag"]

    def swap(self, record: LeaseRecord, expected: str | None) -> str | None:
        body = record.encode()
        try:
            if expected is None:
                answer = self.client.put_object(
                    Bucket=self.bucket, Key=self.key, Body=body, IfNoneMatch="*"
                )
            else:
                answer = self.client.put_object(
                    Bucket=self.bucket, Key=self.key, Body=body, IfMatch=expected
                )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            # 412: another version is there; 409: a concurrent conditional write won.
            if code in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409"):
                return None
            raise LeaseError(f"writing the writer lease {self.where} failed: {exc}") from exc
        except BotoCoreError as exc:
            raise LeaseError(f"writing the writer lease {self.where} failed: {exc}") from exc
        return str(answer["ETag"])


def lease_place(
    store_path: str, blobs: BlobStoreSettings | None, single_host_dir: Path | None = None
) -> StoreLocation:
    """Where the lease of the store at ``store_path`` can live (subscriber.writer.location);
    ``ConfigError`` saying why when it can live nowhere that guards the store: a malformed
    path, a foreign scheme without ``single_host_dir``, an S3 store without S3 settings."""
    try:
        location = store_location(store_path)
    except StorePathError as exc:
        raise ConfigError(f"store_path: {exc}") from None
    reason = refusal(location, single_host_dir)
    if reason is not None:
        raise ConfigError(f"store_path: {reason}")
    if isinstance(location, S3Store) and (blobs is None or blobs.backend != "s3"):
        raise ConfigError(
            "store_path is on S3, whose credentials (and endpoint) the store's lease and "
            "Spark take from the S3 blob store settings: set SCD_BLOB_BACKEND=s3 "
            "(SCD_BLOB_ENDPOINT_URL unset: AWS)"
        )
    return location


def lease_object(
    store_path: str, blobs: BlobStoreSettings | None, single_host_dir: Path | None = None
) -> LeaseObject:
    """The lease object of the store at ``store_path`` (``lease_place`` says where): on S3
    through the endpoint and credentials of the S3 blob store settings (as the store's s3a://
    file system is; no endpoint: AWS), beside a local store, or for a foreign store in
    ``single_host_dir``."""
    location = lease_place(store_path, blobs, single_host_dir)
    if isinstance(location, LocalStore):
        return LocalLeaseObject(location.directory / LEASE_DIR)
    if isinstance(location, ForeignStore):
        assert single_host_dir is not None  # lease_place refused it otherwise
        return LocalLeaseObject(location.lease_directory(single_host_dir))
    assert blobs is not None
    from blobstore.s3 import s3_client

    client = s3_client(blobs, max_attempts=LEASE_S3_ATTEMPTS)
    key = "/".join(p for p in (location.prefix, LEASE_DIR, LEASE_NAME) if p)
    return S3LeaseObject(client, location.bucket, key)


def new_owner(agent_name: str) -> str:
    """A name for this process as a lease holder: agent, host, pid and a random part."""
    return f"{agent_name}@{socket.gethostname()}:{os.getpid()}/{uuid.uuid4().hex[:8]}"


class WriterLease:
    """This process's view of the lease: ``try_acquire`` while standby, ``renew`` while
    holding, ``release`` on a clean stop. Not thread-safe: one thread drives it."""

    def __init__(
        self,
        lease: LeaseObject,
        owner: str,
        ttl_s: float,
        renew_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lease = lease
        self.owner = owner
        self.ttl_s = ttl_s
        self.renew_s = renew_s
        self.clock = clock
        self.epoch: int | None = None  # set while held
        self.holder: LeaseRecord | None = None  # the record last read or written
        self._token: str | None = None
        self._valid_until = 0.0
        self._seen: tuple[str, float] | None = None  # (token, when first seen) of another's

    @property
    def where(self) -> str:
        return self.lease.where

    @property
    def held(self) -> bool:
        """True while this process holds the lease and it has not lapsed."""
        return self.epoch is not None and self.clock() < self._valid_until

    def try_acquire(self) -> bool:
        """Take the lease if it is free, released, or unchanged for its ttl; True if taken."""
        started = self.clock()
        current = self.lease.read()
        if current is None:
            return self._take(LeaseRecord(self.owner, 1, 0, self.ttl_s), None, started)
        record, token = current
        self.holder = record
        # Taken at once: a released lease, or this process's own (it stepped down when a
        # renewal failed, and no one took the lease since).
        if record.owner and record.owner != self.owner:
            if self._seen is None or self._seen[0] != token:
                self._seen = (token, started)
                return False
            if started - self._seen[1] < max(self.ttl_s, record.ttl_s):
                return False
        return self._take(LeaseRecord(self.owner, record.epoch + 1, 0, self.ttl_s), token, started)

    def renew(self) -> bool:
        """Rewrite the lease; False (and no longer held) when another process took it."""
        assert self.epoch is not None, "acquire the lease first"
        return self._rewrite(self.epoch)

    def raise_epoch(self, epoch: int) -> bool:
        """Hold the lease with ``epoch`` from now on: the store holds claims of an epoch this
        lease never handed out (a clone of another store, a lease that was deleted). False (and
        no longer held) when another process took the lease: only its holder can raise it."""
        assert self.epoch is not None, "acquire the lease first"
        assert epoch > self.epoch
        return self._rewrite(epoch)

    def _rewrite(self, epoch: int) -> bool:
        assert self.holder is not None
        started = self.clock()
        record = LeaseRecord(self.owner, epoch, self.holder.renewals + 1, self.ttl_s)
        token = self.lease.swap(record, self._token)
        if token is None:
            self.drop()
            return False
        self._hold(record, token, started)
        return True

    def release(self) -> None:
        """Give the lease up at once (clean stop): a standby takes over without waiting."""
        if self.epoch is None or self.holder is None:
            return
        record = LeaseRecord("", self.epoch, self.holder.renewals + 1, self.ttl_s)
        if self.lease.swap(record, self._token) is not None:
            log.info("writer lease %s released (epoch %d)", self.where, self.epoch)
        self.drop()

    def drop(self) -> None:
        """Forget the lease without writing (it was lost, or this process was deposed)."""
        self.epoch = None
        self._token = None
        self._valid_until = 0.0
        self._seen = None

    def _take(self, record: LeaseRecord, expected: str | None, started: float) -> bool:
        token = self.lease.swap(record, expected)
        if token is None:
            self._seen = None  # another process got there first: watch its version
            return False
        self._hold(record, token, started)
        return True

    def _hold(self, record: LeaseRecord, token: str, started: float) -> None:
        self.holder, self._token, self.epoch = record, token, record.epoch
        # Counted from before the write: a standby saw this version only after it was written.
        self._valid_until = started + self.ttl_s - self.renew_s
