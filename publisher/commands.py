"""Commands to one subscriber on the command topic: numbered (journal/sequence.py) and signed
when a key is configured, keyed by the subscriber's agent name. Clear (publisher/clear.py) and
pause (publisher/pause.py) send theirs through one ``CommandSender``, so each command record of
this agent gets the next number."""

from __future__ import annotations

from journal.api import Journal
from journal.messaging import MessageSender
from journal.sequence import Sequencer
from journal.wire.messages import CommandMessage
from journal.wire.signing import RecordSigner
from publisher.discovery import Subscriber


class CommandSender:
    def __init__(
        self,
        journal: Journal,
        topic: str,
        agent_name: str,
        sequencer: Sequencer,
        signer: RecordSigner | None = None,
    ) -> None:
        self.sender = MessageSender(journal, topic, signer)
        self.sequencer = sequencer
        self.agent_name = agent_name

    def send(self, subscriber: Subscriber, command: CommandMessage) -> int:
        """Address ``command`` to ``subscriber``, number and send it; the record's offset."""
        command.sub_sling_id = subscriber.sling_id
        command.sub_agent_name = subscriber.agent_name
        command.pub_agent_name = self.agent_name

        def numbered(sequence: int) -> tuple[bytes, dict[str, str]]:
            command.sequence = sequence
            return self.sender.encode(command)

        return self.sequencer.send(numbered, key=subscriber.agent_name.encode())
