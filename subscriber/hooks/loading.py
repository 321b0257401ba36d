"""The hooks a subscriber runs: the names in ``SCD_SUBSCRIBER_IMPORT_HOOKS``, each looked up in
the entry-point group ``scd.import_hooks`` of the installed packages (importlib.metadata) and
built by its factory with the subscriber's settings.

Any problem stops the start with a ConfigError naming the hook: a name nothing registers, a
name two packages register differently, a factory that fails or returns no hook. A typo must
not turn into a subscriber that imports without the hook its operator relies on.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

from runtime.errors import ConfigError
from subscriber.hooks.base import ENTRY_POINT_GROUP, ImportHook
from subscriber.settings import SubscriberSettings

SETTING = "SCD_SUBSCRIBER_IMPORT_HOOKS"


def registered() -> dict[str, list[EntryPoint]]:
    """The entry points of the group by name (several when packages disagree)."""
    found: dict[str, list[EntryPoint]] = {}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        same = found.setdefault(point.name, [])
        if all(p.value != point.value for p in same):  # one package seen twice is one
            same.append(point)
    return found


def check_hook_names(settings: SubscriberSettings) -> dict[str, list[EntryPoint]]:
    """The entry points registered, once every configured name is among them (a daemon checks
    this before it opens anything: a typo stops it at once, not after Spark started)."""
    available = registered()
    unknown = [name for name in settings.import_hooks if name not in available]
    if unknown:
        raise ConfigError(
            f"{SETTING} names {', '.join(map(repr, unknown))}, which no installed package "
            f"registers in the entry-point group {ENTRY_POINT_GROUP} (registered: "
            f"{', '.join(sorted(available)) or 'none'})"
        )
    return available


def load_hooks(settings: SubscriberSettings) -> dict[str, ImportHook]:
    """The configured hooks by name, in the configured order."""
    available = check_hook_names(settings)
    hooks: dict[str, ImportHook] = {}
    for name in settings.import_hooks:
        points = available[name]
        if len(points) > 1:
            raise ConfigError(
                f"{SETTING}: hook {name!r} is registered differently by several packages: "
                f"{', '.join(p.value for p in points)}"
            )
        hooks[name] = _build(name, points[0], settings)
    return hooks


def _build(name: str, point: EntryPoint, settings: SubscriberSettings) -> ImportHook:
    try:
        hook = point.load()(settings)
    except Exception as exc:  # an import error, a bad factory, a hook refusing its settings
        raise ConfigError(
            f"{SETTING}: hook {name!r} ({point.value}) could not be built: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(hook, ImportHook):
        raise ConfigError(
            f"{SETTING}: hook {name!r} ({point.value}) gave a {type(hook).__name__}, which has "
            "no pre(package) and post(package, result)"
        )
    return hook
