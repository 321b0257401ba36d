"""Pause and resume: a subscriber's imports are held by a PauseCommand (AEM's queue pause,
Kafka Connect's pause/resume).

The subscriber finishes the commit in progress, imports nothing more until resumed, keeps
announcing (its queue shows PAUSED once it announced the pause) and keeps the state in its
store, so a restart stays paused. Any subscriber can be paused, editable or not; an aggregated
queue cannot (pause its members one by one).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from journal.wire.messages import CommandMessage, PauseCommand
from publisher.commands import CommandSender
from publisher.errors import InvalidRequest
from publisher.queues.views import Queues

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PauseResult:
    queue: str
    paused: bool  # what was asked: True pause, False resume
    command_offset: int


class Pauser:
    def __init__(self, commands: CommandSender, queues: Queues) -> None:
        self.commands = commands
        self.queues = queues

    def pause(self, name: str, paused: bool) -> PauseResult:
        """Send a pause (``paused``) or resume command to the subscriber of queue ``name``."""
        if self.queues.is_aggregated(name):
            raise InvalidRequest(f"{name!r} is an aggregated queue: pause its subscribers")
        subscriber = self.queues.subscriber(name)
        command = CommandMessage(pause_command=PauseCommand(paused=paused))
        offset = self.commands.send(subscriber, command)
        log.info(
            "%s of %s sent (command at offset %d)", "pause" if paused else "resume", name, offset
        )
        return PauseResult(name, paused, offset)
