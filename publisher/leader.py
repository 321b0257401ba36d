"""The publisher agent's leader election: the instances of one agent elect one leader for the
leader-only jobs (distributed events, blob cleanup) through the journal
(``Journal.leadership``)."""

from __future__ import annotations

from journal.leadership import Election
from publisher.settings import PublisherSettings


def leader_group_id(agent_name: str) -> str:
    """The election (on Kafka: the consumer group) of the instances of ``agent_name``."""
    return f"scd-publisher-leader-{agent_name}"


def leader_election(settings: PublisherSettings) -> Election:
    return Election(
        name=leader_group_id(settings.agent_name),
        topic=settings.leader_topic,
        session_timeout_s=settings.leader_session_timeout_s,
        retry_s=settings.leader_lock_retry_s,
        thread_name="publisher-leader",
    )
