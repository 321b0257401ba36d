"""A publisher with a signing key signs every package and command record it sends; without one
it warns at start (outside dev mode) and sends them unsigned."""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi.testclient import TestClient

from journal.api import Position, Record
from journal.errors import UnsignedRecord
from journal.sqlite.journal import SqliteJournal
from journal.wire import messages as m
from journal.wire.signing import SIG_HEADER, SIG_KEY_HEADER, RecordVerifier
from publisher.api import create_app
from tests.publisher.conftest import AUTH, AgentFactory
from tests.publisher.unit.test_queues_api import TOPICS, subscriber, wait_queue


def records(journal: SqliteJournal, topic: str) -> list[Record]:
    with journal.consumer(topic, Position.earliest()) as consumer:
        return consumer.poll(0.5)


def types(found: Sequence[Record]) -> list[str]:
    return [r.headers["type"] for r in found]


def test_package_and_command_records_are_signed(
    make_agent: AgentFactory, journal: SqliteJournal, caplog: pytest.LogCaptureFixture
) -> None:
    key = Ed25519PrivateKey.generate()
    secret = "base64:" + base64.b64encode(key.private_bytes_raw()).decode()
    with caplog.at_level(logging.INFO):
        agent = make_agent(signing_key=secret, signing_key_id="pub-2025")
    assert "unsigned" not in caplog.text
    assert secret[7:] not in caplog.text
    client = TestClient(create_app(agent), headers=AUTH)
    for path in ("/a", "/b"):
        response = client.post("/distribute", json={"action": "DELETE", "paths": [path]})
        assert response.status_code == 200, response.text
    s = subscriber(journal, "c", agent_name="sub-c")
    s.announce(-1)
    wait_queue(client, "c-sub-c", size=2)
    response = client.post("/queues/c-sub-c/clear", json={"mode": "all"})
    assert response.status_code == 200
    assert response.json()["commandOffset"] is not None

    verifier = RecordVerifier({"pub-2025": key.public_key()})
    packages = records(journal, TOPICS.package)
    commands = records(journal, TOPICS.command)
    assert types(packages) == ["PackageMessage"] * 2
    assert types(commands) == ["CommandMessage"]
    for record in [*packages, *commands]:
        assert record.headers[SIG_KEY_HEADER] == "pub-2025"
        assert verifier.verify(record.topic, record.headers, record.value) == "pub-2025"
    # The publisher's own records from others (discovery, written by the simulated subscriber)
    # are not its to sign.
    assert SIG_HEADER not in records(journal, TOPICS.discovery)[0].headers
    # Metrics never carry key material.
    assert secret[7:] not in client.get("/metrics").text


def test_without_a_key_records_are_unsigned_and_a_warning_says_so(
    make_agent: AgentFactory, journal: SqliteJournal, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="publisher.agent"):
        agent = make_agent()
    assert "SCD_PUBLISHER_SIGNING_KEY" in caplog.text
    client = TestClient(create_app(agent), headers=AUTH)
    response = client.post("/distribute", json={"action": "DELETE", "paths": ["/a"]})
    assert response.status_code == 200, response.text
    (record,) = records(journal, TOPICS.package)
    verifier = RecordVerifier({"k": Ed25519PrivateKey.generate().public_key()})
    with pytest.raises(UnsignedRecord):
        verifier.verify(record.topic, record.headers, record.value)
    assert m.decode(record.headers, record.value).pkg_id  # type: ignore[attr-defined]


def test_dev_mode_does_not_warn(make_agent: AgentFactory, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="publisher.agent"):
        make_agent(dev_mode=True)
    assert "SIGNING_KEY" not in caplog.text


def test_records_are_numbered_from_the_log_across_instances(
    make_agent: AgentFactory, journal: SqliteJournal
) -> None:
    def distribute(agent: object, path: str) -> None:
        client = TestClient(create_app(agent), headers=AUTH)  # type: ignore[arg-type]
        response = client.post("/distribute", json={"action": "DELETE", "paths": [path]})
        assert response.status_code == 200, response.text

    first = make_agent()
    distribute(first, "/a")
    distribute(first, "/b")
    first.stop()
    second = make_agent(instance_id="other-instance")  # a restart, or another instance
    distribute(second, "/c")
    client = TestClient(create_app(second), headers=AUTH)
    s = subscriber(journal, "c", agent_name="sub-c")
    s.announce(-1)
    wait_queue(client, "c-sub-c", size=3)
    for mode in ("head", "all"):
        assert client.post("/queues/c-sub-c/clear", json={"mode": mode}).status_code == 200

    packages = [m.decode(r.headers, r.value) for r in records(journal, TOPICS.package)]
    commands = [m.decode(r.headers, r.value) for r in records(journal, TOPICS.command)]
    assert [p.sequence for p in packages] == [1, 2, 3]  # type: ignore[attr-defined]
    assert [c.sequence for c in commands] == [1, 2]  # type: ignore[attr-defined]
