"""Replay scenarios, run on each journal and store (tests/subscriber/unit/test_replays.py: embedded
journal and in-memory store; tests/subscriber/integration/test_replays.py: Kafka and Delta):
records numbered and signed as the publisher does (journal/sequence.py), then copied verbatim to
the log's end as someone with write access but no signing key would."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from journal.api import Position, Record
from journal.content.package import PACKAGE_TYPE, encode_package
from journal.errors import JournalError
from journal.sequence import Sequencer
from journal.wire import messages as m
from journal.wire.signing import RecordSigner
from subscriber.agent import SubscriberAgent
from tests.subscriber import harness as h
from tests.subscriber.harness import Env
from tests.subscriber.packages import node, package
from tests.waiting import wait_for

ADD, DELETE = m.ReqType.ADD, m.ReqType.DELETE
MakeAgent = Callable[..., SubscriberAgent]


class Publisher:
    """Numbers and signs package records as publisher/distribute/distributor.py does."""

    def __init__(self, env: Env) -> None:
        private = Ed25519PrivateKey.generate()
        raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.env = env
        self.signer = RecordSigner("pub-key", private)
        self.verify_keys = {"pub-key": "base64:" + base64.b64encode(raw).decode()}
        self.topic = env.js.topics.package
        self.sequencer = Sequencer(env.journal, self.topic, h.PUB, self.signer.verifier())
        wait_for(lambda: answers(env, self.topic), 30, "the new package topic has a leader")

    def send(self, path: str, action: m.ReqType, number: int | None = None) -> int:
        """Send a numbered, signed package for ``path`` (``number``: forced, out of order)."""
        nodes = [node(path, title=path)] if action == ADD else []
        pkg = package(path.strip("/").replace("/", "-"), action, [(path, True)], nodes)
        data = encode_package(pkg)
        message = m.PackageMessage(
            pub_sling_id="pub-1", pub_agent_name=h.PUB, pkg_id=pkg.package_id, req_type=action,
            pkg_type=PACKAGE_TYPE, pkg_length=len(data), pkg_binary=data,
        )  # fmt: skip
        if number is None:
            return self.sequencer.send(lambda sequence: self._encoded(message, sequence))
        value, headers = self._encoded(message, number)
        return self.env.journal.send(self.topic, value, headers=headers)

    def _encoded(self, message: m.PackageMessage, number: int) -> tuple[bytes, dict[str, str]]:
        message.sequence = number
        value, headers = m.encode(message)
        return value, self.signer.signed_headers(self.topic, headers, value)

    def copy(self, topic: str, offset: int) -> int:
        """Append a byte-for-byte copy of the record at ``offset`` (signature included)."""
        record = read_record(self.env, topic, offset)
        return self.env.journal.send(topic, record.value, key=record.key, headers=record.headers)


def answers(env: Env, topic: str) -> bool:
    """A topic just created may have no partition leader for a moment (a retry helps)."""
    try:
        env.journal.latest_offset(topic)
    except JournalError:
        return False
    return True


def read_record(env: Env, topic: str, offset: int) -> Record:
    with env.journal.consumer(topic, Position.at(offset)) as consumer:
        for _ in range(100):
            for record in consumer.poll(0.2):
                if record.offset == offset:
                    return record
    raise AssertionError(f"no record at {topic}@{offset}")


def replays(agent: SubscriberAgent, kind: str) -> float:
    value = agent.metrics.registry.get_sample_value(
        "scd_replayed_records_total", {"agent": agent.name, "kind": kind}
    )
    return value or 0.0


def copied_add_and_delete(env: Env, make_agent: MakeAgent, *, restart: bool = True) -> None:
    """A copied ADD does not bring a retracted page back; a copied DELETE removes nothing;
    ``restart``: nor does a copy read by a restarted subscriber (its number is in the store)."""
    pub = Publisher(env)
    first_add = pub.send("/r/page", ADD)
    first_delete = pub.send("/r/page", DELETE)  # the page is retracted
    pub.send("/r/other", ADD)
    pub.copy(pub.topic, first_add)
    agent = make_agent(verify_keys=pub.verify_keys)
    try:
        marker = pub.send("/r/marker", ADD)
        h.drive(agent, lambda: agent.processed_offset >= marker, timeout_s=120)
        assert h.stored_paths(agent.store) >= {"/r/other", "/r/marker"}
        assert "/r/page" not in h.stored_paths(agent.store)

        pub.send("/r/page", ADD)  # published again: it is back
        pub.copy(pub.topic, first_delete)
        end = pub.send("/r/end", ADD)
        h.drive(agent, lambda: agent.processed_offset >= end, timeout_s=120)
        assert "/r/page" in h.stored_paths(agent.store)
        assert replays(agent, "package") == 2
        assert agent.state != "SEQUENCE_GAP"
        state = agent.store.state
        assert state is not None
        assert state.sequences == {h.PUB: 6}
    finally:
        agent.stop()
    if not restart:
        return
    # The number lives in the store, with the content: a restarted subscriber refuses a copy.
    pub.copy(pub.topic, first_add)
    again = make_agent(verify_keys=pub.verify_keys)
    try:
        last = pub.send("/r/last", ADD)
        h.drive(again, lambda: again.processed_offset >= last, timeout_s=120)
        assert "/r/page" in h.stored_paths(again.store)
        assert replays(again, "package") == 1
    finally:
        again.stop()


def reordered_pair(env: Env, make_agent: MakeAgent) -> None:
    """Numbers 3 then 2 after 1: 3 is imported and the gap reported (not ready); 2 is refused."""
    pub = Publisher(env)
    pub.send("/o/one", ADD, number=1)
    pub.send("/o/three", ADD, number=3)
    two = pub.send("/o/two", ADD, number=2)
    agent = make_agent(verify_keys=pub.verify_keys)
    try:
        h.drive(agent, lambda: agent.processed_offset >= two, timeout_s=120)
        assert h.stored_paths(agent.store) >= {"/o/one", "/o/three"}
        assert "/o/two" not in h.stored_paths(agent.store)
        assert agent.state == "SEQUENCE_GAP"
        ready, reason = agent.ready()
        assert not ready
        assert "sequence numbers 2..2 of publish" in reason
        assert replays(agent, "package") == 1
    finally:
        agent.stop()


def send_clear(env: Env, agent: SubscriberAgent, commands: Sequencer, clear: m.ClearCommand) -> int:
    """Send ``clear`` for ``agent``, numbered by ``commands``, and hand the record read back to
    the agent's command reader; returns the command's offset."""
    command = m.CommandMessage(
        sub_sling_id=agent.instance_id, sub_agent_name=agent.name, pub_agent_name=h.PUB,
        clear_command=clear,
    )  # fmt: skip

    def numbered(number: int) -> tuple[bytes, dict[str, str]]:
        command.sequence = number
        return m.encode(command)

    at = commands.send(numbered, key=agent.name.encode())
    agent.commands.on_command(command, read_record(env, env.js.topics.command, at))
    return at


def copied_clear_command(env: Env, make_agent: MakeAgent, **store: Any) -> None:
    """A clear refused while beyond the log is not obeyed when copied after the log grew."""
    agent = make_agent(editable=True, **store)
    try:
        commands = Sequencer(env.journal, env.js.topics.command, h.PUB)
        wait_for(lambda: answers(env, env.js.topics.command), 30, "the command topic has a leader")
        latest = env.journal.latest_offset(env.js.topics.package)
        original = send_clear(env, agent, commands, m.ClearCommand(offset=latest + 1))
        agent.commands.persist()  # beyond the log's end: refused
        offsets = [
            env.send(package(f"c{i}", ADD, [(f"/c/{i}", True)], [node(f"/c/{i}")]))
            for i in range(3)
        ]
        copy = Publisher(env).copy(env.js.topics.command, original)
        copied = read_record(env, env.js.topics.command, copy)
        agent.commands.on_command(m.decode(copied.headers, copied.value), copied)  # type: ignore[arg-type]
        agent.commands.persist()
        assert agent.store.state is not None
        assert agent.store.state.clear_offset(h.PUB) == -1
        assert replays(agent, "command") == 1
        h.drive(agent, lambda: agent.processed_offset >= offsets[-1], timeout_s=120)
        assert {"/c/0", "/c/1", "/c/2"} <= h.stored_paths(agent.store)
    finally:
        agent.stop()


def clear_by_sequence(env: Env, make_agent: MakeAgent, **store: Any) -> None:
    """A clear that carries a package number covers the packages numbered up to it, whatever
    its offset says (on another region's mirror the offsets differ: docs/regions.md); one
    numbered beyond the log's packages is refused. The number is kept in the store."""
    pub = Publisher(env)
    agent = make_agent(editable=True, **store)
    try:
        commands = Sequencer(env.journal, env.js.topics.command, h.PUB)
        wait_for(lambda: answers(env, env.js.topics.command), 30, "the command topic has a leader")
        offsets = [pub.send(f"/s/{i}", ADD) for i in range(4)]  # numbered 1..4

        def clear(offset: int, number: int) -> None:
            send_clear(env, agent, commands, m.ClearCommand(offset=offset, sequence=number))
            agent.commands.persist()

        # By offset it would clear all four packages; by number, the first two.
        clear(offsets[3], 2)
        clear(offsets[0], 99)  # no package numbered 99 was written: refused
        state = agent.store.state
        assert state is not None
        assert state.clear_sequences == {h.PUB: 2}
        assert state.clear_offset(h.PUB) == -1
        ignored = agent.metrics.registry.get_sample_value(
            "scd_ignored_commands_total", {"agent": agent.name, "reason": "beyond-log"}
        )
        assert ignored == 1
        h.drive(agent, lambda: agent.processed_offset >= offsets[-1], timeout_s=120)
        stored = h.stored_paths(agent.store)
        assert {"/s/2", "/s/3"} <= stored
        assert not {"/s/0", "/s/1"} & stored

        def removed() -> dict[int, str] | None:
            sent = h.statuses(env.journal, env.js)
            return sent if {offsets[0], offsets[1]} <= sent.keys() else None

        sent = wait_for(removed, 30, "the cleared packages' statuses")
        assert [sent.get(o) for o in offsets[:2]] == ["REMOVED", "REMOVED"]
        assert all(sent.get(o) != "REMOVED" for o in offsets[2:])
    finally:
        agent.stop()
