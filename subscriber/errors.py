"""The subscriber's errors, all under :class:`runtime.errors.ScdError`: ``retriable`` says
whether the same call can succeed when tried again. The fold worker's private ``_IdleExit``
stays in its module."""

from __future__ import annotations

from runtime.errors import PermanentError, ScdError


class TreeReadError(ScdError):
    """The store's table cannot be read (missing, unreadable, or of a protocol delta-rs lacks)."""


class TransientHookFailure(ScdError):
    """A hook failed for a reason a retry may mend (its cause is chained)."""

    retriable = True


class PermanentHookFailure(PermanentError):
    """A hook refused the package for good: no retry can import it."""


class HookTimeout(ScdError):
    """A hook call did not return in time (a transient failure: a retry may find it answering)."""

    retriable = True


class ContentError(ScdError):
    """Reading or exporting the content store's tree failed."""


class NodeNotFound(ContentError):
    def __init__(self, path: str) -> None:
        super().__init__(f"no node at {path!r} in the content store")
        self.path = path


class PropertyNotFound(ContentError):
    def __init__(self, path: str, prop: str) -> None:
        super().__init__(f"node {path!r} has no binary property {prop!r}")
        self.path = path
        self.prop = prop


class BinaryMissing(ContentError):
    """The blob a binary property refers to is not in the blob store."""

    def __init__(self, path: str, prop: str, blob_key: str) -> None:
        super().__init__(
            f"binary {prop!r} of node {path!r}: blob {blob_key!r} is missing from the blob store"
        )
        self.path = path
        self.prop = prop
        self.blob_key = blob_key


class BinaryUnreachable(ContentError):
    """A binary is a blob-store reference but no blob store is configured (SCD_BLOB_*)."""

    def __init__(self, path: str, prop: str, blob_key: str) -> None:
        super().__init__(
            f"{path}: property {prop} is stored in the blob store as {blob_key}, but no blob "
            "store is configured (set SCD_BLOB_*)"
        )


class BinaryCorrupt(ContentError):
    """A binary's bytes do not match the size or sha256 its reference records."""

    def __init__(
        self, path: str, prop: str, blob_key: str, what: str, expected: object, actual: object
    ) -> None:
        super().__init__(
            f"binary {prop!r} of node {path!r} (blob {blob_key}): {what} mismatch, "
            f"expected {expected}, got {actual}"
        )
        self.path = path
        self.prop = prop
        self.blob_key = blob_key
        self.what = what
        self.expected = expected
        self.actual = actual


class ExportError(ContentError):
    """The tree cannot be written to the target directory as it is."""


class UnsafeExportPath(ExportError):
    """A node path that would land outside the target directory."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"refusing to export node {path!r}: {reason}")
        self.path = path


class FoldWorkerError(ScdError):
    """The worker died, hung or answered nonsense: the fold failed, a retry may succeed (with
    a new worker)."""

    retriable = True


class RewriteConflict(ScdError, RuntimeError):
    """A commit that landed while a fold or compaction ran removed a file it replaces, or
    changed the table's schema or protocol: the step is dropped (the maintenance step fails) and
    runs again when next due. Delta raises its ConcurrentDeleteDeleteException for the same
    case."""

    retriable = True


class Unavailable(ScdError):
    """The model cannot answer now; ``reason`` says why (asked again later, it may)."""

    retriable = True

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ReadApiError(ContentError):
    """The read API refused a read or could not be reached."""


class Unsatisfiable(ScdError, ValueError):
    """A range that starts past the binary's end (416)."""


class Stopped(ScdError):
    """The agent stopped while it waited for a slot: the work it waited for was not done."""


class AttemptFailed(ScdError):
    """An import attempt of the package at ``offset`` failed with ``cause``: retriable unless
    the cause is permanent, as the import loop retries it."""

    def __init__(self, offset: int, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.offset = offset
        self.cause = cause
        self.retriable = not isinstance(cause, PermanentError)


class PackageUnavailable(ScdError):
    """The package's blob could not be read now (store down, blob missing): retry may help."""

    retriable = True


class CorruptPackage(PermanentError):
    """The package bytes are wrong (checksum, length, undecodable, unknown version)."""


class BadBinaryReference(PermanentError):
    """A binary reference of the package can never resolve: malformed, or not signed by the
    configured data store's reference key."""


class WriterDeposed(ScdError):
    """The store was claimed by a writer with a later epoch: this process's write did not land
    and it must stop writing (a retry would be refused too)."""


class StorePathError(ScdError, ValueError):
    """The store path cannot name a store (the message says why, without the path)."""


class LeaseError(ScdError):
    """The lease object cannot be read or written: a retry may help."""

    retriable = True


class NotALease(LeaseError):
    """The lease object holds no writer lease: reading it again finds the same bytes."""

    retriable = False
