"""Publisher throttling (Sling's queue size limit): back-pressure on authors when a subscriber
that operators can clear falls behind.

Before a distribute request is built, the publisher looks at the largest queue of the alive
*editable* subscribers. Up to ``limit`` items the request goes through at once; beyond that it
is held back for a delay that grows linearly with the excess, reaching ``max_delay_s`` at twice
the limit and staying there. Only editable subscribers count, as in Sling: their queues can be
cleared by an operator, so a stuck one never throttles authors for good; a read-only
subscriber that falls behind (a publish farm instance, say) must not slow authoring down.

The queue size is the one the maintenance loop last computed (every ``view_refresh_s``): a
request never waits for a queue computation.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Throttle:
    limit: int  # queue items before requests are delayed; 0 turns throttling off
    max_delay_s: float

    def delay_s(self, queue_size: int) -> float:
        """How long a request waits while the largest editable queue holds ``queue_size``."""
        if self.limit <= 0 or queue_size <= self.limit:
            return 0.0
        excess = min(queue_size - self.limit, self.limit)
        return self.max_delay_s * excess / self.limit
