"""The import bookkeeping: follow the package topic from the store's offset, import each package
exactly once, and account for every offset (imported, skipped, failed, cleared): retries,
failures told to the publisher, commands of editable subscribers, staged (canary) import,
statuses sent after their commit, and offsets the topic deleted before they were read.

Public interface: :class:`ImportLoop`, the one thread that writes the store.
"""

from subscriber.bookkeeper.loop import ImportLoop

__all__ = ["ImportLoop"]
