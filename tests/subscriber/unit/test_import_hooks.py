"""Import hooks (subscriber/hooks/): the runner's order, classification and metrics with fake
hooks; loading by entry-point name, hostile names refused; the import scenario of
tests/subscriber/hooks.py on the embedded journal and the in-memory store."""

from __future__ import annotations

import threading
import time
from importlib.metadata import EntryPoint
from typing import Any

import pytest
from pydantic import ValidationError

from journal.wire import messages as m
from runtime.errors import ConfigError, PermanentError, ScdError
from subscriber.agent import SubscriberAgent
from subscriber.errors import HookTimeout, PermanentHookFailure, TransientHookFailure
from subscriber.hooks import (
    ENTRY_POINT_GROUP,
    HookPackage,
    ImportHook,
    ImportHooks,
    ImportResult,
    base,
    loading,
)
from subscriber.hooks.invalidation import InvalidationHook
from subscriber.metrics import SubscriberMetrics
from subscriber.settings import SubscriberSettings
from subscriber.store.memory import MemoryStore
from tests.subscriber import harness as h
from tests.subscriber.harness import Env
from tests.subscriber.hooks import Gate, hooks_retry_discard_and_see_the_commit
from tests.subscriber.packages import node, package
from tests.waiting import wait_for

PKG = HookPackage(
    "sub", h.PUB, "p1", 7, m.ReqType.ADD, package("p1", m.ReqType.ADD, [("/a", True)])
)
RESULT = ImportResult("memory", 5, 7)


class Recording(ImportHook):
    """Appends (name, phase, offset) to a shared list; raises ``error`` in phase ``fails``."""

    def __init__(
        self,
        name: str,
        calls: list[tuple[str, str, int]],
        fails: str = "",
        error: Exception | None = None,
    ) -> None:
        self.name, self.calls, self.fails, self.error = name, calls, fails, error

    def pre(self, package: HookPackage) -> None:
        self._called("pre", package.offset)

    def post(self, package: HookPackage, result: ImportResult) -> None:
        self._called("post", package.offset if result.last_offset >= package.offset else -1)

    def _called(self, phase: str, offset: int) -> None:
        self.calls.append((self.name, phase, offset))
        if phase == self.fails and self.error is not None:
            raise self.error


def sample(metrics: SubscriberMetrics, name: str, hook: str, phase: str, **more: str) -> float:
    labels = {"agent": "sub", "hook": hook, "phase": phase, **more}
    return metrics.registry.get_sample_value(f"scd_import_hook_{name}", labels) or 0.0


def test_pre_hooks_run_in_order_and_stop_at_a_transient_failure() -> None:
    calls: list[tuple[str, str, int]] = []
    metrics = SubscriberMetrics("sub")
    hooks = ImportHooks(
        {
            "first": Recording("first", calls),
            "second": Recording("second", calls, "pre", OSError("disk full")),
            "third": Recording("third", calls),
        },
        metrics,
    )
    with pytest.raises(TransientHookFailure, match="pre hook 'second' failed: OSError: disk full"):
        hooks.pre(PKG)
    assert calls == [("first", "pre", 7), ("second", "pre", 7)]
    assert TransientHookFailure.retriable
    assert sample(metrics, "successes_total", "first", "pre") == 1
    assert sample(metrics, "failures_total", "second", "pre", error_class="transient") == 1
    assert sample(metrics, "requests_total", "third", "pre") == 0
    assert sample(metrics, "duration_seconds_count", "second", "pre") == 1


def test_a_permanent_error_of_a_pre_hook_is_a_permanent_import_failure() -> None:
    metrics = SubscriberMetrics("sub")
    hooks = ImportHooks({"policy": Recording("policy", [], "pre", PermanentError("no"))}, metrics)
    with pytest.raises(PermanentHookFailure) as caught:
        hooks.pre(PKG)
    assert isinstance(caught.value, PermanentError)  # what the triage counts as permanent
    assert isinstance(caught.value.__cause__, PermanentError)
    assert sample(metrics, "failures_total", "policy", "pre", error_class="permanent") == 1


def test_post_hooks_all_run_and_their_failures_are_returned() -> None:
    calls: list[tuple[str, str, int]] = []
    metrics = SubscriberMetrics("sub")
    hooks = ImportHooks(
        {
            "first": Recording("first", calls, "post", PermanentError("bad")),
            "second": Recording("second", calls, "post", TimeoutError("slow")),
            "third": Recording("third", calls),
        },
        metrics,
    )
    failures = hooks.post(PKG, RESULT)
    assert calls == [("first", "post", 7), ("second", "post", 7), ("third", "post", 7)]
    assert [type(f) for f in failures] == [PermanentHookFailure, TransientHookFailure]
    assert sample(metrics, "failures_total", "first", "post", error_class="permanent") == 1
    assert sample(metrics, "failures_total", "second", "post", error_class="transient") == 1
    assert sample(metrics, "successes_total", "third", "post") == 1
    assert sample(metrics, "requests_total", "third", "pre") == 0


def test_the_invalidation_hook_acts_on_invalidate_packages_only() -> None:
    seen: list[list[str]] = []
    hook = InvalidationHook(lambda paths, _pkg: seen.append([*paths]))
    hook.pre(PKG)
    roots = [("/a", True), ("/b", False)]
    hook.pre(
        HookPackage(
            "sub", h.PUB, "i", 8, m.ReqType.INVALIDATE, package("i", m.ReqType.INVALIDATE, roots)
        )
    )
    hook.post(PKG, RESULT)
    assert seen == [["/a", "/b"]]


class Hanging(ImportHook):
    """A pre hook that blocks until ``release`` is set (a cache that never answers)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def pre(self, package: HookPackage) -> None:  # noqa: ARG002
        self.calls += 1
        self.release.wait(30)


def hook_threads(name: str) -> int:
    return sum(1 for t in threading.enumerate() if t.name == f"scd-hook-{name}")


def test_a_hung_hook_fails_the_attempt_after_the_timeout_and_holds_one_thread() -> None:
    metrics = SubscriberMetrics("sub")
    hung = Hanging()
    hooks = ImportHooks({"cdn": hung}, metrics, timeout_s=0.2)
    started = time.monotonic()
    with pytest.raises(TransientHookFailure, match="pre hook 'cdn' failed: HookTimeout: no return"):
        hooks.pre(PKG)
    assert 0.2 <= time.monotonic() - started < 5
    # Until the hung call returns, the next attempts fail at once without a new thread.
    for _ in range(3):
        with pytest.raises(TransientHookFailure, match=r"earlier call overran 0\.2 s"):
            hooks.pre(PKG)
    assert hung.calls == 1
    assert hook_threads("cdn") == 1
    assert sample(metrics, "failures_total", "cdn", "pre", error_class="transient") == 4
    # Once it returned, the hook is called again.
    hung.release.set()
    wait_for(lambda: hook_threads("cdn") == 0, 5, "the hung call to return")
    hooks.pre(PKG)
    assert hung.calls == 2
    assert sample(metrics, "successes_total", "cdn", "pre") == 1


def test_a_hook_timeout_is_a_retriable_scd_error() -> None:
    hung = Hanging()
    hooks = ImportHooks({"cdn": hung}, SubscriberMetrics("sub"), timeout_s=0.05)
    with pytest.raises(TransientHookFailure) as failure:
        hooks.pre(PKG)
    hung.release.set()
    timeout = failure.value.__cause__
    assert isinstance(timeout, HookTimeout)
    assert isinstance(timeout, ScdError)
    assert timeout.retriable


def test_a_hook_raising_a_base_exception_is_a_transient_failure_not_a_dead_thread() -> None:
    class Exiting(ImportHook):
        def post(self, package: HookPackage, result: ImportResult) -> None:  # noqa: ARG002
            raise SystemExit(3)

    failures = ImportHooks({"exit": Exiting()}, SubscriberMetrics("sub")).post(PKG, RESULT)
    assert [type(f) for f in failures] == [TransientHookFailure]
    assert "SystemExit: 3" in str(failures[0])


def test_the_hook_timeout_setting_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    assert SubscriberSettings().import_hook_timeout_s == 30.0
    for value in ("0", "-1", "3601", "soon"):
        monkeypatch.setenv("SCD_SUBSCRIBER_IMPORT_HOOK_TIMEOUT_S", value)
        with pytest.raises(ValidationError, match="import_hook_timeout_s"):
            SubscriberSettings()


# ---------------------------------------------------------------------- loading by name
def settings(**values: Any) -> SubscriberSettings:
    return SubscriberSettings(**values)


def not_a_hook(_settings: SubscriberSettings) -> object:
    return object()


def broken_factory(_settings: SubscriberSettings) -> ImportHook:
    raise ValueError("HOOK_URL is not set")


def test_the_built_in_invalidation_hook_is_registered_by_name() -> None:
    hooks = loading.load_hooks(settings(import_hooks="invalidate"))
    assert list(hooks) == ["invalidate"]
    assert isinstance(hooks["invalidate"], InvalidationHook)


def test_hooks_base_names_only_what_is_used() -> None:
    """A factory is any callable the entry point names: base.py has no alias for its type."""
    assert not hasattr(base, "HookFactory")


def test_an_unknown_hook_name_stops_the_agent_at_construction(local_env: Env) -> None:
    values = h.subscriber_settings(local_env.js, local_env.bs, local_env.tmp / "s").model_dump()
    bad = SubscriberSettings(**{**values, "import_hooks": ["invalidate", "flush_cdn"]})
    with pytest.raises(
        ConfigError, match=r"IMPORT_HOOKS names 'flush_cdn'.*registered: .*invalidate"
    ):
        SubscriberAgent(bad, local_env.journal, MemoryStore(), local_env.blobs)
    good = SubscriberSettings(**{**values, "import_hooks": ["invalidate"]})
    agent = SubscriberAgent(good, local_env.journal, MemoryStore(), local_env.blobs)
    assert list(agent.hooks.hooks) == ["invalidate"]


@pytest.mark.parametrize(
    ("points", "message"),
    [
        ([("x", f"{__name__}:not_a_hook")], "gave a object, which has no pre"),
        ([("x", f"{__name__}:broken_factory")], "could not be built: ValueError: HOOK_URL"),
        ([("x", "no_such_module_for_hooks:factory")], "could not be built: ModuleNotFoundError"),
        ([("x", f"{__name__}:not_a_hook"), ("x", f"{__name__}:broken_factory")], "differently"),
    ],
)
def test_a_hook_that_cannot_be_built_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, points: list[tuple[str, str]], message: str
) -> None:
    found = [EntryPoint(name, value, ENTRY_POINT_GROUP) for name, value in points]
    monkeypatch.setattr(loading, "entry_points", lambda **_: found)
    with pytest.raises(ConfigError, match=message):
        loading.load_hooks(settings(import_hooks="x"))


@pytest.mark.parametrize(
    "value",
    [
        "invalidate,invalidate",
        "bad name",
        "a" * 101,
        "x;import os",
        ",".join(f"h{i}" for i in range(21)),
    ],
)
def test_hostile_hook_lists_are_refused_by_the_settings(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("SCD_SUBSCRIBER_IMPORT_HOOKS", value)
    with pytest.raises(ValidationError, match="import_hooks"):
        SubscriberSettings()


# ---------------------------------------------------------------------- in the import loop
def test_hooks_in_the_import_loop(local_env: Env) -> None:
    store = MemoryStore()
    hooks_retry_discard_and_see_the_commit(
        local_env,
        lambda **kw: local_env.memory_agent(store, **kw),
        lambda _result, path: store.node(path),
        {"a", "t", "b", "c"},
    )


def test_a_package_a_pre_hook_refuses_keeps_its_sequence_number(local_env: Env) -> None:
    """The record is genuine: its number counts as applied, so the next one is no gap."""
    offsets = [
        local_env.send(
            package(pkg_id, m.ReqType.ADD, [(f"/{pkg_id}", True)], [node(f"/{pkg_id}")]),
            sequence=n,
        )
        for n, pkg_id in enumerate(["s1", "s2", "s3"], start=1)
    ]
    store = MemoryStore()
    agent = local_env.memory_agent(store, hooks={"policy": Gate(transient={}, permanent={"s2"})})
    h.drive(agent, lambda: agent.processed_offset == offsets[-1])
    assert agent.loop.sequences.gap is None
    assert store.state is not None
    assert store.state.sequences[h.PUB] == 3
    assert agent.counters.permanent_failures == 1
    assert h.stored_paths(store) == {"/s1", "/s3"}
    agent.stop()
