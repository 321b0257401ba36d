"""Import hooks (Sling's ImportPreProcessor, ImportPostProcessor and InvalidationProcessor):
an operator's code run before and after each package's import.

* ``base``: what a hook is (:class:`ImportHook`: ``pre(package)``, ``post(package, result)``),
  what it is shown, and how its failures are classified;
* ``loading``: the hooks named in ``SCD_SUBSCRIBER_IMPORT_HOOKS``, found in the entry-point
  group ``scd.import_hooks``;
* ``runner``: runs them in order, with their metrics;
* ``invalidation``: the built-in hook of INVALIDATE packages (entry point ``invalidate``).

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
