"""The one root exception of scd, and the journal's own errors.

Every error says whether retrying the same call can help (``retriable``): a broker that is
down is worth retrying, a message that is too large for the topic never is.
"""

from __future__ import annotations


class ScdError(Exception):
    """Root of every error scd raises on purpose."""

    retriable: bool = False


class PermanentError(ScdError):
    """Input that can never be processed as it is, anywhere: retrying it cannot help, so it is
    never retried (a subscriber records the package as REMOVED_FAILED and goes on)."""


class ConfigError(ScdError):
    """Invalid or unsafe configuration; names the offending setting."""


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


class DecodeError(PermanentError):
    """Bytes could not be decoded into a known message or package."""


class UnknownMessageType(DecodeError):
    """A record's ``type`` header names a message type this version does not know."""


class UnsupportedPackageVersion(DecodeError):
    """A content package uses a format version this version cannot read."""
