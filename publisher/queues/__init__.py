"""The publisher's queues: one per alive subscriber, each a view of the package topic after the
offset that subscriber processed.

Public interface: :class:`QueueCache` (``cache``: the package entries read from the topic, kept
by a tail and a head reader), :class:`Queues` (``views``: per-subscriber queues, their states and
items), :class:`ErrorQueues` (``error_queues``: packages a subscriber gave up on) and
:class:`Throttle` (``throttle``: back-pressure on authors when a queue grows too long).
``entries`` stores cached entries compactly.
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
