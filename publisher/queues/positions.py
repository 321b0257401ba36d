"""Where a subscriber is on the publisher's own package topic, in the publisher's offsets.

A subscriber announced on the publisher's own discovery topic reads this log: its offset is
used as announced. One announced on another region's copy (``SCD_PUBLISHER_REMOTE_TOPIC_PREFIXES``,
docs/regions.md) reads a mirror whose offsets differ; the last sequence number of this agent it
applied (journal/sequence.py) is mapped through the queue cache, which holds this agent's
packages in order with their numbers:

* a cached package is numbered at or below it: the processed offset is the offset of the
  highest such package, so the queue holds exactly the packages numbered above it;
* it is above every cached number (the cache's tail is behind the log for a moment, or the
  number is forged): caught up, the last offset the cache read; the queue is empty;
* it is below every cached number: the cache fetches the retained log once (as a local
  subscriber at offset 0 makes it; bounded by the fetch timeout) and looks again; still below,
  the packages it needs left the log (retention): just before the cache's window, so the queue
  shows every retained package, as for a local subscriber whose offset the log deleted.

A remote announcement without a number (0: an older subscriber, Sling) keeps its offset, which
is wrong by the mirror's shift (docs/regions.md). Every lookup is a bisect; hostile numbers
cost at most the one fetch.
"""

from __future__ import annotations

from publisher.discovery import Subscriber
from publisher.queues.cache import QueueCache


def processed_offset(subscriber: Subscriber, agent_name: str, cache: QueueCache) -> int | None:
    """The subscriber's last processed offset of ``agent_name``'s packages on the publisher's
    package topic (-1: none yet; None: it does not follow the agent)."""
    state = subscriber.states.get(agent_name)
    if state is None:
        return None
    if not subscriber.remote or state.sequence <= 0:
        return state.offset
    return offset_after_number(cache, state.sequence)


def offset_after_number(cache: QueueCache, number: int) -> int:
    """The processed offset of a subscriber that applied every package up to ``number``."""
    numbers = cache.numbers()
    if numbers is None or number < numbers[0]:
        cache.ensure_all()
        numbers = cache.numbers()
    if numbers is None or number > numbers[1]:
        return cache.next_offset - 1
    offset = cache.offset_upto_number(number)
    return offset if offset is not None else cache.covered_from - 1


def package_offset(cache: QueueCache, number: int) -> int | None:
    """The offset of the package numbered ``number`` on the publisher's topic (None: not on
    the retained log, or never sent)."""
    offset = cache.offset_of_number(number)
    if offset is None:
        numbers = cache.numbers()
        if numbers is None or number < numbers[0]:
            cache.ensure_all()
            offset = cache.offset_of_number(number)
    return offset
