"""Where a store lives, read from its path: which writer lease it can have.

The writer lease (subscriber.writer.lease) must keep a second process out of a store whatever
host it runs on. scd has such a lease for two kinds of store:

* **S3**: ``s3a://bucket/prefix``, and ``s3://bucket/prefix`` as its alias (the Hadoop S3A file
  system serves both, subscriber.spark): conditional PUTs on the lease object, on AWS or on any
  S3 server that honours ``If-Match`` / ``If-None-Match``;
* **local**: a plain path or ``file:///absolute/path``: ``flock`` beside the store, which holds
  for the processes of one host.

Any other scheme (``gs://``, ``abfss://``, ``hdfs://``, ``wasbs://``, a typo such as
``s3n:`` or ``store:1``) is **foreign**: scd has no lease there that another host would see,
so the daemon refuses it (``refusal``) unless the operator vouches that every process
writing it runs on this one host (``SCD_SUBSCRIBER_SINGLE_HOST_LEASE_DIR``).

Paths are read as Hadoop reads them (a scheme is letters, digits and ``+ . -`` before the first
``:`` that comes before any ``/``), so a path is never taken for local when Spark would open it
elsewhere. A malformed one is refused with the reason (``StorePathError``), never the value's
secrets: credentials in a URL are refused, not echoed.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from subscriber.errors import StorePathError

# Hadoop's (and RFC 3986's) scheme: a letter, then letters, digits, + . -
SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):(.*)", re.DOTALL)
# S3 bucket names (AWS's rules, as scd's blob store settings have them).
BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
S3_SCHEMES = ("s3a", "s3")
# Longest store path accepted: S3 keys end at 1024 bytes, file paths at 4096.
MAX_PATH_CHARS = 4096
SINGLE_HOST_SETTING = "SCD_SUBSCRIBER_SINGLE_HOST_LEASE_DIR"


@dataclass(frozen=True)
class LocalStore:
    directory: Path  # the table's directory; the lease lies inside it


@dataclass(frozen=True)
class S3Store:
    scheme: str  # s3a or s3
    bucket: str
    prefix: str  # the table's key prefix, no leading or trailing "/" ("" for the bucket)


@dataclass(frozen=True)
class ForeignStore:
    scheme: str
    canonical: str  # one spelling per store: scheme://authority/path, slashes collapsed

    def lease_directory(self, root: Path) -> Path:
        """The directory of its single-host lease under ``root``: named by a digest of the
        store's spelling (a URL is no file name)."""
        return root / hashlib.sha256(self.canonical.encode()).hexdigest()[:32]


StoreLocation = LocalStore | S3Store | ForeignStore


def store_location(path: str) -> StoreLocation:
    """Where the store at ``path`` lives; ``StorePathError`` when ``path`` names none."""
    if not path.strip():
        raise StorePathError("the store path is empty")
    if len(path) > MAX_PATH_CHARS:
        raise StorePathError(f"the store path is longer than {MAX_PATH_CHARS} characters")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        raise StorePathError("the store path holds a control character")
    match = SCHEME.fullmatch(path)
    if match is None:
        return LocalStore(Path(path))
    scheme, rest = match.group(1), match.group(2)
    lower = scheme.lower()
    if lower != scheme:
        # Hadoop looks a file system up by the scheme as written: S3A:// would find none.
        raise StorePathError(f"write the store path's scheme in lower case ({lower}:)")
    if lower == "file":
        return _local(rest)
    if lower in S3_SCHEMES:
        return _s3(lower, rest)
    return ForeignStore(lower, f"{lower}:{_collapse(rest)}")


def refusal(location: StoreLocation, single_host_dir: Path | None) -> str | None:
    """Why a daemon must not write a store there with these settings (None: it may)."""
    if not isinstance(location, ForeignStore) or single_host_dir is not None:
        return None
    return (
        f"scd has a writer lease that every host sees only for stores on S3 (s3a://, s3://) "
        f"and on local paths; a store on {location.scheme}:// would have none, so subscriber "
        "processes on two hosts could both write it and import packages twice. Put the store "
        f"on S3, or, if every process writing it runs on this one host, set "
        f"{SINGLE_HOST_SETTING} to a local directory for its lease"
    )


def _local(rest: str) -> LocalStore:
    """``file:///abs``, ``file:/abs`` (Hadoop's spelling) or ``file://localhost/abs``."""
    if rest.startswith("//"):
        authority, slash, tail = rest[2:].partition("/")
        if authority not in ("", "localhost"):
            raise StorePathError("a file: store path names a host: only this host's files work")
        rest = slash + tail
    if not rest.startswith("/"):
        raise StorePathError("a file: store path must be absolute (file:///path)")
    return LocalStore(Path(rest))


def _s3(scheme: str, rest: str) -> S3Store:
    if not rest.startswith("//"):
        raise StorePathError(f"an {scheme}: store path is {scheme}://bucket/prefix")
    bucket, _, key = rest[2:].partition("/")
    if "@" in bucket or ":" in bucket:
        raise StorePathError(
            f"an {scheme}:// store path names credentials or a port: the S3 endpoint and "
            "credentials come from SCD_BLOB_*"
        )
    if not BUCKET.fullmatch(bucket):
        raise StorePathError(
            f"the bucket of an {scheme}:// store path must be 3-63 lower-case letters, digits, "
            "'.' or '-'"
        )
    parts = [p for p in key.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise StorePathError(f"an {scheme}:// store path holds a '.' or '..' segment")
    return S3Store(scheme, bucket, "/".join(parts))


def _collapse(rest: str) -> str:
    """``//authority/a//b/`` as ``//authority/a/b``: one spelling of a foreign store."""
    authority = ""
    if rest.startswith("//"):
        authority, _, rest = rest[2:].partition("/")
        authority, rest = f"//{authority}", f"/{rest}"
    path = posixpath.normpath(re.sub(r"/+", "/", rest)) if rest.strip("/") else ""
    return authority + path
