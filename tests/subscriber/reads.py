"""What the read API's tests and benches serve from: the readers of a daemon of one agent."""

from __future__ import annotations

from subscriber.reads.model import ReadModel


class OneModel:
    """The readers of a daemon of one agent, ``solo``: its paths as they are and under
    ``/agents/solo``."""

    def __init__(self, model: ReadModel, name: str = "solo") -> None:
        self.model = model
        self.name = name

    def reader(self, agent: str | None) -> ReadModel:
        if agent not in (None, self.name):
            raise LookupError(f"no agent {agent!r} in this daemon")
        return self.model
