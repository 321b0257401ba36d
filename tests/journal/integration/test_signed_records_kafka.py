"""Signature headers survive a real Kafka broker: sent with MessageSender, read back, verified."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from journal.api import Position, TopicSpec
from journal.errors import BadSignature
from journal.kafka.journal import KafkaJournal
from journal.messaging import MessageSender
from journal.wire import messages as m
from journal.wire.signing import SIG_KEY_HEADER, RecordSigner, RecordVerifier
from tests.services import KafkaService

pytestmark = pytest.mark.integration


def test_signed_command_roundtrips_through_kafka(
    kafka_service: KafkaService, unique_name: str
) -> None:
    key = Ed25519PrivateKey.generate()
    verifier = RecordVerifier({"k1": key.public_key()})
    command = m.CommandMessage(
        sub_sling_id="s",
        sub_agent_name="sub",
        pub_agent_name="publish",
        clear_command=m.ClearCommand(offset=3),
    )
    with KafkaJournal(kafka_service.bootstrap) as journal:
        journal.create_topics([TopicSpec(unique_name)])
        MessageSender(journal, unique_name, RecordSigner("k1", key)).send(command, key="sub")
        with journal.consumer(unique_name, Position.earliest()) as consumer:
            found = []
            for _ in range(50):
                found += consumer.poll(0.5)
                if found:
                    break
    (record,) = found
    assert record.headers[SIG_KEY_HEADER] == "k1"
    assert verifier.verify(record.topic, record.headers, record.value) == "k1"
    assert m.decode(record.headers, record.value) == command
    with pytest.raises(BadSignature):
        verifier.verify(record.topic, {**record.headers, "type": "PackageMessage"}, record.value)
