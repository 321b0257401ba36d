"""Running the configured hooks: in order, each call timed and counted
(``scd_import_hook_*{agent,hook,phase}``), each failure classified (subscriber.hooks.base).

Pre hooks stop at the first failure: the import attempt fails with it, and the hooks after
it do not run for that attempt. Post hooks all run: the package is committed whatever one of
them does, so one failing takes nothing from the others.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping

from runtime.errors import PermanentError, ScdError
from subscriber.hooks.base import HookPackage, ImportHook, ImportResult, Phase, hook_failure
from subscriber.hooks.metrics import HookMetrics
from subscriber.metrics import SubscriberMetrics

log = logging.getLogger(__name__)


class ImportHooks:
    def __init__(self, hooks: Mapping[str, ImportHook], metrics: SubscriberMetrics) -> None:
        self.hooks = dict(hooks)  # name -> hook, in the order they run
        self.metrics = HookMetrics(metrics)

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
        try:
            call()
        except Exception as exc:  # any hook error is an import failure, classified below
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
