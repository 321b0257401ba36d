"""Errors of the journal: a backend that cannot be reached, a fenced writer, a record too large
for its topic, a topic or message type that does not exist. All under
:class:`runtime.errors.ScdError`; ``retriable`` says whether retrying the same call can help.
"""

from __future__ import annotations

from runtime.errors import DecodeError, ScdError


class JournalError(ScdError):
    """A journal operation failed."""


class JournalUnavailable(JournalError):
    """The journal (broker or database) could not be reached within the configured timeout."""

    retriable = True


class Fenced(JournalError):
    """A fenced writer was superseded: a writer with the same fence id opened after it. It
    can write nothing more; what it sent since its last completed batch is never read."""


class MessageTooLarge(JournalError):
    """A record is larger than the topic's configured maximum; refused before sending."""

    def __init__(self, topic: str, size: int, limit: int) -> None:
        super().__init__(
            f"record of {size} bytes exceeds the {limit}-byte limit of topic {topic!r}"
        )
        self.topic = topic
        self.size = size
        self.limit = limit


class UnknownTopic(JournalError):
    """The topic does not exist (and was not created)."""


class UnknownMessageType(DecodeError):
    """A record's ``type`` header names a message type this version does not know."""


class ForeignWireFormat(UnknownMessageType):
    """A record of the other wire format (protobuf on a sling-json deployment, or the reverse):
    skipped like an unknown type, never decoded as this one."""


class UnsupportedPackageVersion(DecodeError):
    """A content package uses a format version this version cannot read."""


class NotWriter(JournalUnavailable):
    """This instance may not write the agent's numbered records now (another one does): a
    retry, through the instance that writes, helps."""


class SignatureError(DecodeError):
    """A record's signature is missing, malformed, by an unknown key, or wrong. Permanent: the
    same record never verifies later. Messages name the key id, never key material."""

    retriable = False


class UnsignedRecord(SignatureError):
    """The record carries no signature while signatures are required."""


class BadSignature(SignatureError):
    """The signature headers are malformed, or the signature does not match the record."""


class UnknownSigningKey(SignatureError):
    """The record is signed with a key id that is not (or no longer) accepted."""

    def __init__(self, key_id: str) -> None:
        super().__init__(f"record signed with unknown key {key_id!r}")
        self.key_id = key_id
