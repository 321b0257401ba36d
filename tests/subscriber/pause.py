"""Pause and resume scenarios, run on each journal and store (tests/subscriber/unit/test_pause.py:
embedded journal and in-memory store; tests/subscriber/integration/test_pause.py: Kafka and
Delta): pause commands numbered and signed as the publisher sends them (publisher/commands.py),
read by the subscriber's own command reader thread."""

from __future__ import annotations

import time
from collections.abc import Callable

from journal.sequence import Sequencer
from journal.wire import messages as m
from subscriber.agent import SubscriberAgent
from subscriber.store.base import Store
from subscriber.store.delta import DeltaStore
from subscriber.store.memory import MemoryStore
from tests.subscriber import harness as h
from tests.subscriber.harness import Env
from tests.subscriber.replays import Publisher, answers, replays
from tests.waiting import wait_for

ADD = m.ReqType.ADD
MakeAgent = Callable[..., SubscriberAgent]
# How long a paused subscriber is watched for an import it must not make: several of its
# polls (50 ms) and announcements (0.5 s).
HELD_S = 1.0


class Commands:
    """Sends pause commands to one subscriber as the publisher does: numbered, signed."""

    def __init__(self, env: Env, pub: Publisher) -> None:
        self.env, self.pub = env, pub
        self.topic = env.js.topics.command
        wait_for(lambda: answers(env, self.topic), 30, "the command topic has a leader")
        self.sequencer = Sequencer(env.journal, self.topic, h.PUB, pub.signer.verifier())

    def message(self, agent: SubscriberAgent, paused: bool) -> m.CommandMessage:
        return m.CommandMessage(
            sub_sling_id=agent.instance_id, sub_agent_name=agent.name, pub_agent_name=h.PUB,
            pause_command=m.PauseCommand(paused=paused),
        )  # fmt: skip

    def send(self, command: m.CommandMessage, *, signed: bool = True, numbered: bool = True) -> int:
        key = command.sub_agent_name.encode()
        if numbered:
            return self.sequencer.send(lambda number: self._encoded(command, signed, number), key)
        value, headers = self._encoded(command, signed, command.sequence)
        return self.env.journal.send(self.topic, value, key=key, headers=headers)

    def _encoded(
        self, command: m.CommandMessage, signed: bool, number: int
    ) -> tuple[bytes, dict[str, str]]:
        command.sequence = number
        value, headers = m.encode(command)
        if signed:
            headers = self.pub.signer.signed_headers(self.topic, headers, value)
        return value, headers


def committed(store: Store) -> list[int]:
    """Every package offset the store's commits covered, once per commit covering it."""
    if isinstance(store, DeltaStore):
        return h.committed_offsets(store)
    assert isinstance(store, MemoryStore)
    return store.committed_offsets()


def send(pub: Publisher, names: list[str]) -> list[int]:
    return [pub.send(f"/p/{name}", ADD) for name in names]


def held(agent: SubscriberAgent, offset: int, paths: set[str]) -> None:
    """The agent stays at ``offset`` and has none of ``paths``, while showing PAUSED."""
    time.sleep(HELD_S)
    assert agent.processed_offset == offset
    assert agent.state == "PAUSED"
    assert agent.health().state == "PAUSED"
    assert agent.announcer.message().paused is True
    assert not paths & h.stored_paths(agent.store)


def paused_across_a_restart(env: Env, make_agent: MakeAgent) -> float:
    """Pause holds imports (the batch committing finishes), survives a restart of the
    subscriber, and resume imports the rest exactly once; a copy of the pause command sent after
    the resume is refused. Returns the seconds the agents ran."""
    started = time.monotonic()
    pub = Publisher(env)
    commands = Commands(env, pub)
    agent = make_agent(verify_keys=pub.verify_keys).start()
    try:
        before = send(pub, ["a", "b"])
        wait_for(lambda: agent.processed_offset == before[-1], 120, "the first packages imported")
        pause = commands.send(commands.message(agent, True))
        wait_for(lambda: agent.state == "PAUSED", 60, "the subscriber paused")
        held_back = send(pub, ["c", "d", "e"])
        held(agent, before[-1], {"/p/c", "/p/d", "/p/e"})
        instance = agent.instance_id
    finally:
        agent.stop()

    again = make_agent(verify_keys=pub.verify_keys)
    try:
        assert again.instance_id == instance
        assert again.state == "PAUSED"  # read from the store, before any command is read
        again.start()
        held(again, before[-1], {"/p/c", "/p/d", "/p/e"})
        commands.send(commands.message(again, False))
        wait_for(lambda: again.processed_offset == held_back[-1], 120, "the rest imported")
        assert again.state in ("IDLE", "RUNNING")
        assert again.announcer.message().paused is False
        assert {f"/p/{n}" for n in "abcde"} <= h.stored_paths(again.store)
        package_offsets = [o for o in committed(again.store) if o in before + held_back]
        assert package_offsets == before + held_back  # each package once

        # A byte-for-byte copy of the signed pause command: refused as a replay.
        pub.copy(commands.topic, pause)
        wait_for(lambda: replays(again, "command") == 1, 60, "the copied pause refused")
        last = send(pub, ["f"])[-1]
        wait_for(lambda: again.processed_offset == last, 120, "imports go on")
        assert again.state != "PAUSED"
    finally:
        again.stop()
    return time.monotonic() - started


def ignored(agent: SubscriberAgent, reason: str) -> float:
    value = agent.metrics.registry.get_sample_value(
        "scd_ignored_commands_total", {"agent": agent.name, "reason": reason}
    )
    return value or 0.0


def hostile_pause_commands(env: Env, make_agent: MakeAgent) -> None:
    """Unsigned (forged), another publisher agent's, unnumbered, another subscriber's: none
    pauses the subscriber; each refusal is counted by reason."""
    pub = Publisher(env)
    commands = Commands(env, pub)
    agent = make_agent(verify_keys=pub.verify_keys).start()
    try:
        forged = commands.message(agent, True)
        commands.send(forged, signed=False)
        other_agent = commands.message(agent, True)
        other_agent.pub_agent_name = "someone-else"
        commands.send(other_agent)
        commands.send(commands.message(agent, True), numbered=False)
        other_subscriber = commands.message(agent, True)
        other_subscriber.sub_sling_id = "another-instance"
        commands.send(other_subscriber)
        wait_for(
            lambda: (
                [ignored(agent, r) for r in ("signature", "agent", "unnumbered")] == [1.0, 1.0, 1.0]
            ),
            60,
            "three refusals",
        )
        last = send(pub, ["x"])[-1]
        wait_for(lambda: agent.processed_offset == last, 120, "imports go on")
        assert agent.state != "PAUSED"
        assert agent.store.state is not None
        assert agent.store.state.paused is False
    finally:
        agent.stop()
