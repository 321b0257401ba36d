"""Open the journal backend a JournalSettings names."""

from __future__ import annotations

from journal.api import Journal
from journal.kafka.journal import KafkaJournal
from journal.settings import JournalSettings
from journal.sqlite.journal import SqliteJournal
from journal.wire.headers import set_wire_format


def open_journal(settings: JournalSettings) -> Journal:
    """The journal backend; also makes ``settings.wire_format`` this process's wire format."""
    set_wire_format(settings.wire_format)
    if settings.backend == "kafka":
        return KafkaJournal(
            settings.bootstrap_servers,
            max_message_bytes=settings.max_message_bytes,
            send_timeout_s=settings.send_timeout_s,
            request_timeout_s=settings.request_timeout_s,
            client_config=settings.client_config(),
        )
    return SqliteJournal(settings.sqlite_path, max_message_bytes=settings.max_message_bytes)
