"""Exponential back-off between import attempts of a failing package."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    initial_s: float
    max_s: float
    max_retries: int  # < 0: retry forever (block); otherwise give up after that many retries

    def delay(self, failed_attempts: int) -> float:
        """Pause after the given number of failed attempts (1 -> initial)."""
        return min(self.initial_s * 2.0 ** max(failed_attempts - 1, 0), self.max_s)

    def gives_up(self, failed_attempts: int) -> bool:
        """True once the package has used all its attempts (max_retries + 1 in total)."""
        return self.max_retries >= 0 and failed_attempts > self.max_retries
