"""What an import hook is, what it sees, and how its failures count.

A hook is an object with ``pre(package)`` and ``post(package, result)``; an installed package
registers a factory for it (``Callable[[SubscriberSettings], ImportHook]``) under a name in
the entry-point group ``scd.import_hooks``, and ``SCD_SUBSCRIBER_IMPORT_HOOKS`` lists the names
a subscriber runs, in order.

A hook's failure is classified as any import failure is: a ``runtime.errors.PermanentError``
means no retry can help (the package is REMOVED_FAILED at once); anything else is transient.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from journal.content.package import ContentPackage
from journal.wire import messages as m
from runtime.errors import PermanentError, ScdError
from subscriber.errors import PermanentHookFailure, TransientHookFailure

ENTRY_POINT_GROUP = "scd.import_hooks"

Phase = Literal["pre", "post"]


@dataclass(frozen=True)
class HookPackage:
    """A package of a followed publisher agent that this subscriber imports (not a skipped,
    cleared or failed one). ``content`` is the decoded package: a hook must not change it."""

    subscriber: str  # the subscriber agent's name
    pub_agent: str
    pkg_id: str
    offset: int
    req_type: int  # journal.wire.messages.ReqType
    content: ContentPackage

    @property
    def paths(self) -> list[str]:
        """The distributed paths (the package's filter roots)."""
        return [root.path for root in self.content.roots]

    @property
    def action(self) -> str:
        """ADD, DELETE, TEST or INVALIDATE."""
        return m.ReqType.Name(self.req_type)


@dataclass(frozen=True)
class ImportResult:
    """The Delta commit that holds the package: the store's location and the offsets the
    commit covers (several packages share one commit when the subscriber is behind)."""

    store: str
    first_offset: int
    last_offset: int


@runtime_checkable
class ImportHook(Protocol):
    """Subclass it (its methods do nothing) or write both methods."""

    # The defaults do nothing with what they are given.
    def pre(self, package: HookPackage) -> None:  # noqa: ARG002
        """Before the package joins a commit: raising fails this import attempt (retried, or
        REMOVED_FAILED at once for a PermanentError). Runs again on every attempt and after
        a restart: at least once, so it must be idempotent."""
        return None

    def post(self, package: HookPackage, result: ImportResult) -> None:  # noqa: ARG002
        """After the commit holding the package: at most once (a crash between the commit and
        the hook skips it). Raising never undoes nor repeats the import: the failure is
        logged, counted and reported."""
        return None


def hook_failure(name: str, phase: Phase, cause: Exception) -> ScdError:
    """The import failure standing for ``cause``, of the same class, naming the hook."""
    text = f"{phase} hook {name!r} failed: {type(cause).__name__}: {cause}"
    if isinstance(cause, PermanentError):
        return PermanentHookFailure(text)
    return TransientHookFailure(text)
