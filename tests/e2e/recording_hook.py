"""An import hook the end-to-end tests install in their subscriber daemons through an entry
point (tests/e2e/test_operator_features.py writes the distribution metadata that registers it):
the invalidation hook (subscriber.hooks.invalidation) with an ``invalidate`` of its own that
reports the paths to a small HTTP server of the test, as an operator's cache hook would, and a
post hook reporting each package's commit, so the test sees what each subscriber imported,
when, and how many times. A package distributed under ``/e2e-refused-by/<subscriber>`` fails
that subscriber's pre hook for good (a PermanentError), as a hook refusing content would.
"""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Sequence

from runtime.errors import PermanentError
from subscriber.hooks.base import HookPackage, ImportResult
from subscriber.hooks.invalidation import InvalidationHook
from subscriber.settings import SubscriberSettings

# The test's recording server (an environment variable of the daemon, not an SCD_* setting).
URL_VARIABLE = "E2E_HOOK_URL"
ENTRY_POINT = "e2e_record"
TIMEOUT_S = 10.0
REFUSED_BY = "/e2e-refused-by/"


def _report(url: str, phase: str, package: HookPackage, **more: object) -> None:
    body = {
        "phase": phase,
        "subscriber": package.subscriber,
        "pkgId": package.pkg_id,
        "offset": package.offset,
        "action": package.action,
        "paths": package.paths,
        **more,
    }
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    # A failed report raises: a transient hook failure, retried as any import failure.
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
        answer.read()


class RecordingHook(InvalidationHook):
    def __init__(self, url: str) -> None:
        super().__init__(self._invalidate)
        self.url = url

    def pre(self, package: HookPackage) -> None:
        if REFUSED_BY + package.subscriber in package.paths:
            raise PermanentError(f"{package.subscriber} refuses {package.pkg_id} (test hook)")
        super().pre(package)

    def _invalidate(self, paths: Sequence[str], package: HookPackage) -> None:
        _report(self.url, "invalidate", package, invalidated=list(paths))

    def post(self, package: HookPackage, result: ImportResult) -> None:
        _report(
            self.url,
            "post",
            package,
            store=result.store,
            offsets=[result.first_offset, result.last_offset],
        )


def recording_hook(_settings: SubscriberSettings) -> RecordingHook:
    """The entry point ``e2e_record``."""
    return RecordingHook(os.environ[URL_VARIABLE])
