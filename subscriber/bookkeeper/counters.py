"""What the import loop counts, for /health and the tests."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class AgentCounters:
    imported: int = 0
    skipped: int = 0
    permanent_failures: int = 0
    commits: int = 0
    unknown_records: int = 0
    last_batch: int = 0
    loop_restarts: int = 0  # import loop restarted from the stored offset after an error
    import_seconds: list[float] = field(default_factory=list)
