"""Simulated subscribers: the journal records a subscriber agent would write.

The publisher only sees subscribers through the journal, so writing their DiscoveryMessages,
PackageStatusMessages and LogMessages is a faithful stand-in for the real subscriber agent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from journal.api import Journal
from journal.messaging import MessageSender
from journal.settings import TopicSettings
from journal.wire.messages import (
    DiscoveryMessage,
    LogMessage,
    PackageStatusMessage,
    Status,
    SubscriberConfiguration,
    SubscriberState,
)


@dataclass
class SimulatedSubscriber:
    journal: Journal
    topics: TopicSettings
    sling_id: str
    agent_name: str = "subscriber"
    pub_agent_name: str = "publish"
    editable: bool = True
    max_retries: int = -1

    @property
    def queue_name(self) -> str:
        return f"{self.sling_id}-{self.agent_name}"

    def announce(
        self,
        offset: int | None,
        retries: int = 0,
        *,
        paused: bool = False,
        canary_pending: Sequence[str] = (),
        canary_failed: Sequence[str] = (),
        sequence: int = 0,
    ) -> int:
        message = DiscoveryMessage(
            sub_sling_id=self.sling_id,
            sub_agent_name=self.agent_name,
            subscriber_configuration=SubscriberConfiguration(
                editable=self.editable, max_retries=self.max_retries
            ),
            paused=paused,
            canary_pending=canary_pending,
            canary_failed=canary_failed,
        )
        if offset is not None:
            message.subscriber_state.append(
                SubscriberState(
                    pub_agent_name=self.pub_agent_name,
                    offset=offset,
                    retries=retries,
                    sequence=sequence,
                )
            )
        return MessageSender(self.journal, self.topics.discovery).send(message, key=self.agent_name)

    def status(self, offset: int, status: int, sequence: int = 0) -> int:
        message = PackageStatusMessage(
            sub_sling_id=self.sling_id,
            sub_agent_name=self.agent_name,
            pub_agent_name=self.pub_agent_name,
            offset=offset,
            status=status,  # type: ignore[arg-type]
            sequence=sequence,
        )
        return MessageSender(self.journal, self.topics.status).send(message)

    def failed(self, offset: int, sequence: int = 0) -> int:
        return self.status(offset, Status.REMOVED_FAILED, sequence)

    def log_error(self, offset: int, text: str, pkg_id: str = "", sequence: int = 0) -> int:
        message = LogMessage(
            pub_agent_name=self.pub_agent_name,
            sub_sling_id=self.sling_id,
            sub_agent_name=self.agent_name,
            message=text,
            stacktrace=f"Traceback: {text}",
            offset=offset,
            pkg_id=pkg_id,
            sequence=sequence,
        )
        return MessageSender(self.journal, self.topics.status).send(message)
