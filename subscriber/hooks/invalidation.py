"""The invalidation hook (Sling's InvalidationProcessor): on each INVALIDATE package it
invalidates the package's paths, before the package is committed, so a failed invalidation
is retried (or given up) like any import failure and the offset passes the package only once
its paths were invalidated.

Registered as entry point ``invalidate``: that one logs the paths (what to invalidate is the
operator's cache: a hook of theirs gives ``InvalidationHook`` its own ``invalidate``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from journal.wire import messages as m
from subscriber.hooks.base import HookPackage, ImportHook
from subscriber.settings import SubscriberSettings

log = logging.getLogger(__name__)

# Paths named in one log line: a package may carry thousands; the count is always logged.
MAX_LOGGED_PATHS = 20

Invalidate = Callable[[Sequence[str], HookPackage], None]


class InvalidationHook(ImportHook):
    def __init__(self, invalidate: Invalidate) -> None:
        self.invalidate = invalidate

    def pre(self, package: HookPackage) -> None:
        if package.req_type == m.ReqType.INVALIDATE:
            self.invalidate(package.paths, package)


def log_invalidation(paths: Sequence[str], package: HookPackage) -> None:
    log.info(
        "%s: invalidate %d paths of %s at offset %d: %s",
        package.subscriber,
        len(paths),
        package.pkg_id,
        package.offset,
        ", ".join(paths[:MAX_LOGGED_PATHS]) + (", ..." if len(paths) > MAX_LOGGED_PATHS else ""),
    )


def invalidation_hook(_settings: SubscriberSettings) -> InvalidationHook:
    """The entry point ``invalidate``."""
    return InvalidationHook(log_invalidation)
