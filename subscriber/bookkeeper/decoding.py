"""A package record read as far as the import needs it, and what failed on the way.

Everything a record carries is checked here, before the import looks at it: its signature
(when keys are configured), the message's fields, the package bytes (length, checksum,
format version, decoded size), a FileVault package's Oak data store references
(subscriber.bookkeeper.oak_refs, when SCD_OAK_* configures a data store) and the content
rules. A failure is kept with the record:

* permanent (runtime.errors.PermanentError: undecodable, forged, unknown version or enum,
  checksum mismatch, over a size limit, content breaking a rule): the package can never be
  imported anywhere; the import records REMOVED_FAILED for it at once, never retrying it;
* transient (anything else: blob store or journal unavailable, a blob not there yet): a retry
  may mend it; the import retries it with back-off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from google.protobuf.message import Message

from blobstore.api import BlobStore
from blobstore.oak import OakDataStore
from journal.api import Record
from journal.content import rules
from journal.content.filevault import FILEVAULT_PACKAGE_TYPE, Unmodelled
from journal.content.package import ContentPackage
from journal.errors import UnknownMessageType
from journal.wire import messages as m
from journal.wire.signing import RecordVerifier
from runtime.errors import DecodeError, PermanentError
from subscriber.bookkeeper.fetch import read_package
from subscriber.bookkeeper.oak_refs import resolve_references


@dataclass(frozen=True)
class Decoded:
    """A record decoded, its package read (for a followed agent's package), or the error."""

    message: Message | None = None
    package: ContentPackage | None = None
    error: Exception | None = None
    size: int = 0  # bytes held in memory for it (decoded package, or the record)
    unmodelled: Unmodelled | None = None  # what the package holds that scd does not import

    @property
    def unknown(self) -> bool:
        """A message type this version does not know: skipped, as a newer one may write it."""
        return isinstance(self.error, UnknownMessageType)

    @property
    def permanent(self) -> bool:
        return isinstance(self.error, PermanentError) and not self.unknown

    @property
    def package_message(self) -> m.PackageMessage | None:
        return self.message if isinstance(self.message, m.PackageMessage) else None


class RecordDecoder:
    def __init__(
        self,
        topic: str,
        pub_agents: Sequence[str],
        blobs: BlobStore | None,
        limits: rules.ContentLimits,
        verifier: RecordVerifier | None,
        oak: OakDataStore | None = None,
    ) -> None:
        self.topic = topic
        self.pub_agents = frozenset(pub_agents)
        self.blobs = blobs
        self.limits = limits
        self.verifier = verifier
        self.oak = oak  # resolves a FileVault package's Oak data store references

    def decode(self, record: Record) -> Decoded:
        try:
            message = m.decode(record.headers, record.value)
        except DecodeError as exc:
            return Decoded(error=exc, size=len(record.value))
        if (
            not isinstance(message, m.PackageMessage)
            or message.pub_agent_name not in self.pub_agents
        ):
            return Decoded(message, size=len(record.value))
        try:
            if self.verifier is not None:
                self.verifier.verify(self.topic, record.headers, record.value)
            rules.check_package_message(message, self.limits)
            package, unmodelled = read_package(message, self.blobs, self.limits)
            if self.oak is not None and message.pkg_type == FILEVAULT_PACKAGE_TYPE:
                resolve_references(package, self.oak, self.blobs)
            rules.check_package(package, message.req_type, self.limits)
        except Exception as exc:  # classified by the import: permanent or transient
            return Decoded(message, error=exc, size=len(record.value))
        size = max(package.ByteSize(), len(record.value))
        return Decoded(message, package, size=size, unmodelled=unmodelled)
