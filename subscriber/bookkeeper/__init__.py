"""The import bookkeeping: follow the package topic from the store's offset, import each
package exactly once, and account for every offset (imported, skipped, failed, cleared).

Public interface: :class:`ImportLoop` (``loop``: the one thread that writes the store). Its
parts: ``decoding`` and ``fetch`` (a record read as far as the import needs it, inline or from
the blob store), ``triage`` (import, skip or fail), ``retries`` (isolate and retry what a retry
may mend), ``failures`` (tell the publisher and the log), ``clear`` (clear commands of editable
subscribers), ``statuses`` (statuses sent after their commit, idle maintenance),
``behind_log`` (offsets the topic deleted before they were read), ``counters``.
"""

from subscriber.bookkeeper.loop import ImportLoop

__all__ = ["ImportLoop"]
