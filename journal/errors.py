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
