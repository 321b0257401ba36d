"""Import hooks (Sling's ImportPreProcessor, ImportPostProcessor and InvalidationProcessor):
an operator's code run before and after each package's import, named in
``SCD_SUBSCRIBER_IMPORT_HOOKS`` and found in the entry-point group ``scd.import_hooks``; the
built-in ``invalidate`` hook handles INVALIDATE packages.

Public interface: :class:`ImportHook` (``pre(package)``, ``post(package, result)``), what a hook
is shown (:class:`HookPackage`, :class:`ImportResult`), :data:`ENTRY_POINT_GROUP`, and
:class:`ImportHooks` (the configured hooks, run in order with their metrics).
docs/import-hooks.md has the rules a hook's author relies on.
"""

from subscriber.hooks.base import (
    ENTRY_POINT_GROUP,
    HookPackage,
    ImportHook,
    ImportResult,
)
from subscriber.hooks.runner import ImportHooks

__all__ = ["ENTRY_POINT_GROUP", "HookPackage", "ImportHook", "ImportHooks", "ImportResult"]
