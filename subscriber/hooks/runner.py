"""Running the configured hooks: in order, each call timed and counted
(``scd_import_hook_*{agent,hook,phase}``), each failure classified (subscriber.hooks.base).

Pre hooks stop at the first failure: the import attempt fails with it, and the hooks after
it do not run for that attempt. Post hooks all run: the package is committed whatever one of
them does, so one failing takes nothing from the others.

A hook is third-party code that may hang (a cache that never answers): each call runs on its
own daemon thread and the import waits at most ``timeout_s`` for it. A call that overruns is
a transient failure (retried like any); Python cannot stop the thread, so until it returns
every further call of that hook fails at once instead of starting another one: at most one
hung thread per hook.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping

from runtime.errors import PermanentError, ScdError
from subscriber.errors import HookTimeout
from subscriber.hooks.base import HookPackage, ImportHook, ImportResult, Phase, hook_failure
from subscriber.hooks.metrics import HookMetrics
from subscriber.metrics import SubscriberMetrics

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 30.0


class _Call:
    """One hook call on its own daemon thread; ``error`` is what it raised."""

    def __init__(self, name: str, call: Callable[[], None]) -> None:
        self.call = call
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"scd-hook-{name}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.call()
        except BaseException as exc:  # handed to the import thread, which classifies it
            self.error = exc
        finally:
            self.done.set()


class ImportHooks:
    def __init__(
        self,
        hooks: Mapping[str, ImportHook],
        metrics: SubscriberMetrics,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.hooks = dict(hooks)  # name -> hook, in the order they run
        self.metrics = HookMetrics(metrics)
        self.timeout_s = timeout_s
        self._overrun: dict[str, _Call] = {}  # hook name -> a call still running past its time

    def pre(self, package: HookPackage) -> None:
        """Run every pre hook; raises the first failure as a PermanentHookFailure or a
        TransientHookFailure."""
        for name, hook in self.hooks.items():
            error = self._call(name, "pre", package, functools.partial(hook.pre, package))
            if error is not None:
                raise error

    def post(self, package: HookPackage, result: ImportResult) -> list[ScdError]:
        """Run every post hook; returns their failures (none raised: the package is
        committed)."""
        failures: list[ScdError] = []
        for name, hook in self.hooks.items():
            error = self._call(name, "post", package, functools.partial(hook.post, package, result))
            if error is not None:
                failures.append(error)
        return failures

    def _call(
        self, name: str, phase: Phase, package: HookPackage, call: Callable[[], None]
    ) -> ScdError | None:
        started = time.monotonic()
        exc = self._run(name, call)
        if exc is not None:  # any hook error is an import failure, classified below
            error = hook_failure(name, phase, exc)
            error.__cause__ = exc
            error_class = "permanent" if isinstance(error, PermanentError) else "transient"
            self.metrics.called(name, phase, time.monotonic() - started, error_class)
            log.warning(
                "%s: %s hook %s failed (%s) on %s at offset %d: %s",
                package.subscriber,
                phase,
                name,
                error_class,
                package.pkg_id,
                package.offset,
                exc,
                exc_info=exc,
            )
            return error
        self.metrics.called(name, phase, time.monotonic() - started, None)
        return None

    def _run(self, name: str, call: Callable[[], None]) -> Exception | None:
        """What the call raised, a HookTimeout when it overran, or None."""
        overrun = self._overrun.get(name)
        if overrun is not None:
            if not overrun.done.is_set():
                return HookTimeout(
                    f"an earlier call overran {self.timeout_s:g} s and has not returned yet"
                )
            del self._overrun[name]
        running = _Call(name, call)
        if not running.done.wait(self.timeout_s):
            self._overrun[name] = running
            return HookTimeout(f"no return within {self.timeout_s:g} s")
        error = running.error
        if error is None or isinstance(error, Exception):
            return error
        return RuntimeError(f"{type(error).__name__}: {error}")  # SystemExit and the like
