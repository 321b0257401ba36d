"""/health, /ready and /metrics of a daemon's agents, one endpoint for all of them.

* /health: per agent its health, readiness and threads (``agents``); at the top level the
  fields launchers read, over all agents: ``holdsPosition`` once every agent holds its
  position, ``processedOffset`` and ``startOffset`` the lowest (None while one has none),
  ``state`` the most severe of the agents' states. With one agent the top level is exactly
  that agent's health, as it always was.
* /ready: ready once every agent is ready. One daemon is one unit for an orchestrator (it is
  started, stopped and routed to as one), and an agent that is not ready serves stale
  content: answering ready for the others would hide it. The reason names each agent that is
  not ready and why.
* An agent whose thread is down (failed and waiting for its restart, or ended for good) shows
  ``FAILED`` and which thread in ``threads``; the supervisor logged the failure.
* reads (subscriber.reads.api): ``reader`` finds an agent's read model by name, or the only
  agent's;
* /metrics: every agent's series, each labelled ``agent`` (subscriber.metrics), in one
  exposition; a process-wide series (thread restarts) appears once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from runtime.supervisor import Supervisor
from subscriber.http import Health
from subscriber.metrics import SubscriberMetrics
from subscriber.reads.model import ReadModel

# The top-level state of several agents: the first of these any agent is in. A state not
# listed (a newer one) ranks before RUNNING: it is something an operator should see.
SEVERITY = (
    "FAILED",
    "BEHIND_LOG",
    "SEQUENCE_GAP",
    "BLOCKED",
    "RETRYING",
    "STOPPING",
    "STARTING",
    "STANDBY",
    "PAUSED",
    "RUNNING",
    "IDLE",
)
FAILED = "FAILED"


class Agent(Protocol):
    """What the view reads of a subscriber agent (subscriber.agent.SubscriberAgent)."""

    @property
    def name(self) -> str: ...

    @property
    def metrics(self) -> SubscriberMetrics: ...

    @property
    def supervisor(self) -> Supervisor: ...

    @property
    def reads(self) -> ReadModel | None: ...

    def health(self) -> Health: ...

    def ready(self) -> tuple[bool, str]: ...


class AgentHealth(Health):
    """One agent's health with its readiness and its threads."""

    ready: bool
    reason: str
    threads: str  # "N threads running" or which thread is down and why


class DaemonHealth(Health):
    agents: list[AgentHealth]


class AgentsView:
    """The endpoint's three callables (subscriber.http.HealthServer) over ``agents``."""

    def __init__(self, agents: Sequence[Agent]) -> None:
        if not agents:
            raise ValueError("a daemon runs at least one agent")
        self.agents = list(agents)

    def add(self, agent: Agent) -> None:
        """One more agent (an agents file reloaded): the list is replaced, never changed
        under a request reading it."""
        self.agents = [*self.agents, agent]

    def remove(self, agent: Agent) -> None:
        self.agents = [a for a in self.agents if a is not agent]

    def agent_health(self, agent: Agent) -> AgentHealth:
        health = agent.health()
        ready, reason = agent.ready()
        threads_ok, threads = agent.supervisor.health()
        fields = health.model_dump()
        if not threads_ok:
            fields["state"] = FAILED
        return AgentHealth(**fields, ready=ready, reason=reason, threads=threads)

    def health(self) -> DaemonHealth:
        each = [self.agent_health(agent) for agent in self.agents]
        if len(each) == 1:
            top = each[0].model_dump(include=set(Health.model_fields))
        else:
            roles = {h.role for h in each}
            top = {
                "agent": f"{len(each)} agents",
                "instance_id": None,
                "processed_offset": _lowest([h.processed_offset for h in each]),
                "state": min((h.state for h in each), key=_severity),
                "role": roles.pop() if len(roles) == 1 else "mixed: see agents",
                "holds_position": all(h.holds_position for h in each),
                "start_offset": _lowest([h.start_offset for h in each]),
            }
        return DaemonHealth(**top, agents=each)

    def ready(self) -> tuple[bool, str]:
        answers = [(agent.name, *agent.ready()) for agent in self.agents]
        if len(answers) == 1:
            return answers[0][1], answers[0][2]
        waiting = [f"{name}: {reason}" for name, ready, reason in answers if not ready]
        if not waiting:
            return True, f"all {len(answers)} agents ready"
        return False, f"{len(waiting)} of {len(answers)} agents not ready; " + "; ".join(waiting)

    def reader(self, agent: str | None) -> ReadModel:
        """The read model of ``agent`` (None: the only agent); LookupError saying why not
        (subscriber.reads.api.Readers)."""
        agents = self.agents
        if agent is None:
            if len(agents) != 1:
                names = ", ".join(a.name for a in agents)
                raise LookupError(
                    f"this daemon runs {len(agents)} agents ({names}): read "
                    "/agents/{name}/content/... or /agents/{name}/binaries/..."
                )
            chosen = agents[0]
        else:
            found = [a for a in agents if a.name == agent]
            if not found:
                raise LookupError(f"no agent {agent!r} in this daemon")
            chosen = found[0]
        if chosen.reads is None:
            raise LookupError(f"agent {chosen.name} serves no reads (SCD_SUBSCRIBER_READ_API)")
        return chosen.reads

    def metrics(self) -> bytes:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Merged([agent.metrics.registry for agent in self.agents]))
        return generate_latest(registry)


def _lowest(offsets: list[int | None]) -> int | None:
    """The lowest offset, None while one agent has none (the daemon holds no lower bound)."""
    known = [o for o in offsets if o is not None]
    return min(known) if len(known) == len(offsets) else None


def _severity(state: str) -> int:
    return SEVERITY.index(state) if state in SEVERITY else SEVERITY.index("RUNNING") - 1


class _Merged(Collector):
    """The families of several registries as one: each family once, each series once."""

    def __init__(self, registries: Iterable[CollectorRegistry]) -> None:
        self.registries = list(registries)

    def collect(self) -> Iterable[Metric]:
        families: dict[str, Metric] = {}
        seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
        for registry in self.registries:
            for family in registry.collect():
                merged = families.get(family.name)
                if merged is None:
                    merged = Metric(family.name, family.documentation, family.type, family.unit)
                    families[family.name] = merged
                for sample in family.samples:
                    key = (sample.name, tuple(sorted(sample.labels.items())))
                    if key not in seen:
                        seen.add(key)
                        merged.samples.append(sample)
        return families.values()
