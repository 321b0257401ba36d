"""The journal: the log that carries every message between publisher and subscribers.

Public interface: the backend-neutral API (:class:`Journal`, :class:`Consumer`,
:class:`Record`, :class:`Position`, :class:`TopicSpec`), :func:`open_journal` for the backend
that :class:`JournalSettings` names, :func:`topic_specs` for the five topics, and the journal
errors. Subpackages: ``kafka/`` and ``sqlite/`` (the two backends), ``wire/`` (message codec and
signed records), ``content/`` (the content package and its rules). ``messaging`` sends and polls
typed messages; ``cli`` and ``keys`` are the journal's ``scd`` subcommands.
"""

from journal.api import Consumer, FencedWriter, Journal, Position, Record, TopicSpec
from journal.errors import (
    Fenced,
    JournalError,
    JournalUnavailable,
    MessageTooLarge,
    UnknownMessageType,
    UnknownTopic,
)
from journal.factory import open_journal
from journal.settings import JournalSettings
from journal.topics import topic_specs

__all__ = [
    "Consumer",
    "Fenced",
    "FencedWriter",
    "Journal",
    "JournalError",
    "JournalSettings",
    "JournalUnavailable",
    "MessageTooLarge",
    "Position",
    "Record",
    "TopicSpec",
    "UnknownMessageType",
    "UnknownTopic",
    "open_journal",
    "topic_specs",
]
