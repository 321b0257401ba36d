"""The publisher's queues: one per alive subscriber, each a view of the package topic after the
offset that subscriber processed, with its error queue and the back-pressure on authors when an
editable subscriber's queue grows too long.

Public interface: :class:`QueueCache` (the package entries read from the topic),
:class:`Queues` with :class:`QueueItem`, :class:`QueueState` and :class:`QueueSummary`,
:class:`ErrorQueues` with :class:`ReportedError`, and :class:`Throttle`.
"""

from publisher.queues.cache import QueueCache
from publisher.queues.error_queues import ErrorQueues, ReportedError
from publisher.queues.throttle import Throttle
from publisher.queues.views import QueueItem, Queues, QueueState, QueueSummary

__all__ = [
    "ErrorQueues",
    "QueueCache",
    "QueueItem",
    "QueueState",
    "QueueSummary",
    "Queues",
    "ReportedError",
    "Throttle",
]
