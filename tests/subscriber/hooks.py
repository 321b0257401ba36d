"""Import hook scenarios, run on each journal and store (tests/subscriber/unit/test_import_hooks.py:
embedded journal and in-memory store; tests/subscriber/integration/test_agent.py: Kafka, S3 and
Delta): hooks of a test that fail on given packages, and one that reads the store after each
commit."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from journal.wire import messages as m
from runtime.errors import PermanentError
from subscriber.agent import SubscriberAgent
from subscriber.hooks import HookPackage, ImportHook, ImportResult
from subscriber.hooks.invalidation import InvalidationHook
from subscriber.store.rows import StoredNode
from tests.subscriber import harness as h
from tests.subscriber.harness import Env
from tests.subscriber.packages import node, package
from tests.subscriber.unit.test_import_failures import failure_events_on
from tests.waiting import wait_for

ADD = m.ReqType.ADD
# Until the failure events of the scenario are on the event topic (a loaded machine).
EVENTS_TIMEOUT_S = 30.0
# (the import's result, a path): the node as the store holds it for a reader, or None.
ReadCommitted = Callable[[ImportResult, str], StoredNode | None]
MakeAgent = Callable[..., SubscriberAgent]


@dataclass
class Gate(ImportHook):
    """A pre hook failing on given packages: ``transient`` the first N attempts, ``permanent``
    always (a PermanentError)."""

    transient: dict[str, int]
    permanent: set[str]
    calls: Counter[str] = field(default_factory=Counter)

    def pre(self, package: HookPackage) -> None:
        self.calls[package.pkg_id] += 1
        if self.calls[package.pkg_id] <= self.transient.get(package.pkg_id, 0):
            raise ConnectionError(f"gate service unavailable for {package.pkg_id}")
        if package.pkg_id in self.permanent:
            raise PermanentError(f"{package.pkg_id} refused by policy")


@dataclass
class Witness(ImportHook):
    """A post hook noting each package's commit, and reading the packages in ``read_back``
    back from the store (a read is a Spark job on Delta: one is enough there)."""

    read: ReadCommitted
    read_back: set[str]
    seen: list[tuple[str, bool]] = field(default_factory=list)  # id, within the commit
    stored: dict[str, bool] = field(default_factory=dict)  # id: the store holds its content

    def post(self, package: HookPackage, result: ImportResult) -> None:
        self.seen.append(
            (package.pkg_id, result.first_offset <= package.offset <= result.last_offset)
        )
        if package.pkg_id in self.read_back:
            found = self.read(result, package.paths[0])
            self.stored[package.pkg_id] = found is not None and found.pkg_id == package.pkg_id


class Notify(ImportHook):
    """A post hook whose remote end is down for one package."""

    def __init__(self, failing: str) -> None:
        self.failing = failing

    def post(self, package: HookPackage, result: ImportResult) -> None:
        if package.pkg_id == self.failing:
            raise TimeoutError(f"notification of {result.store} timed out")


def hooks_retry_discard_and_see_the_commit(
    env: Env, make_agent: MakeAgent, read: ReadCommitted, read_back: set[str]
) -> None:
    """A pre hook's transient failure is retried, then the package imported; its permanent one
    is REMOVED_FAILED at once; post hooks run after the commit and find the content stored; a
    post hook's failure is reported, never re-imports; INVALIDATE reaches the invalidation
    hook. ``read_back``: the packages (of a, t, b, c) the post hook reads back from the store."""
    invalidated: list[list[str]] = []
    gate = Gate(transient={"t": 1}, permanent={"p"})
    witness = Witness(read, read_back)
    hooks: dict[str, ImportHook] = {
        "gate": gate,
        "invalidate": InvalidationHook(lambda paths, _pkg: invalidated.append([*paths])),
        "witness": witness,
        "notify": Notify("b"),
    }
    # t, the package a pre hook fails once, is spilled: each attempt reads it from the blob store.
    sent = {
        pkg_id: env.send(
            package(pkg_id, req, [(f"/{path}", True)], nodes),
            blobs=env.blobs if pkg_id == "t" else None,
        )
        for pkg_id, req, path, nodes in [
            ("a", ADD, "a", [node("/a", title="a")]),
            ("t", ADD, "t", [node("/t", title="t")]),
            ("p", ADD, "p", [node("/p", title="p")]),
            ("i", m.ReqType.INVALIDATE, "a", []),
            ("b", ADD, "b", [node("/b", title="b")]),
            ("c", ADD, "c", [node("/c", title="c")]),
        ]
    }
    agent = make_agent(hooks=hooks, editable=True, max_retries=2)
    try:
        h.drive(agent, lambda: agent.processed_offset == sent["c"])
        assert h.stored_paths(agent.store) == {"/a", "/t", "/b", "/c"}
        statuses = h.statuses(env.journal, env.js)
        assert {pkg: statuses.get(offset) for pkg, offset in sent.items()} == {
            "a": "IMPORTED",
            "t": "IMPORTED",
            "p": "REMOVED_FAILED",
            "i": "IMPORTED",
            "b": "IMPORTED",
            "c": "IMPORTED",
        }
        # t attempted twice, the others once: a pre hook runs on every attempt.
        assert gate.calls == {"a": 1, "t": 2, "p": 1, "i": 1, "b": 1, "c": 1}
        assert invalidated == [["/a"]]
        # Post hooks after the commit, once per imported package (b's failure re-imports
        # nothing), each package's content in the store when its post hook runs.
        assert witness.seen == [("a", True), ("t", True), ("i", True), ("b", True), ("c", True)]
        assert witness.stored == dict.fromkeys(read_back, True)
        expected = {
            ("t", 1, "transient", False, "pre hook 'gate' failed"),
            ("p", 1, "permanent", True, "pre hook 'gate' failed"),
            ("b", 1, "transient", False, "post hook 'notify' failed"),
        }

        def events() -> set[tuple[str, int, str, bool, str]]:
            return {
                (e.package_id, e.attempt, e.error_class, e.will_discard, e.message.split(":")[0])
                for e in failure_events_on(env.journal, env.js.topics.event)
            }

        # Events are sent beside the imports and a reader on Kafka takes a moment to fetch
        # them: read until as many as expected came (a wrong one still fails below).
        seen: set[tuple[str, int, str, bool, str]] = set()

        def enough() -> bool:
            seen.update(events())
            return len(seen) >= len(expected)

        wait_for(enough, EVENTS_TIMEOUT_S, "the hooks' failure events")
        assert seen == expected
        logs = {
            (log.pkg_id, log.message.split(":")[0]) for log in h.log_messages(env.journal, env.js)
        }
        assert logs == {("t", "attempt 1"), ("p", "permanent"), ("b", "after commit")}
        sample = agent.metrics.registry.get_sample_value

        def calls(metric: str, hook: str, phase: str, **more: str) -> float | None:
            labels = {"agent": agent.name, "hook": hook, "phase": phase, **more}
            return sample(f"scd_import_hook_{metric}", labels)

        assert calls("requests_total", "gate", "pre") == 7
        assert calls("successes_total", "gate", "pre") == 5
        assert calls("failures_total", "gate", "pre", error_class="transient") == 1
        assert calls("failures_total", "gate", "pre", error_class="permanent") == 1
        assert calls("duration_seconds_count", "gate", "pre") == 7
        assert calls("requests_total", "notify", "post") == 5
        assert calls("failures_total", "notify", "post", error_class="transient") == 1
        assert calls("successes_total", "witness", "post") == 5
    finally:
        agent.stop()
