"""The journal's topics (package, status, discovery, command, event) as TopicSpecs derived
from settings."""

from __future__ import annotations

from journal.api import TopicSpec
from journal.settings import JournalSettings


def topic_specs(settings: JournalSettings) -> list[TopicSpec]:
    t = settings.topics
    control = min(t.control_max_message_bytes, settings.max_message_bytes)
    return [
        TopicSpec(t.package, 1, t.package_retention_ms, settings.max_message_bytes),
        # Status, command and event topics live at least as long as the packages they name.
        TopicSpec(t.status, 1, t.package_retention_ms, control),
        TopicSpec(t.discovery, t.discovery_partitions, t.discovery_retention_ms, control),
        TopicSpec(t.command, t.command_partitions, t.package_retention_ms, control),
        TopicSpec(t.event, t.event_partitions, t.package_retention_ms, control),
    ]
