"""Errors of one writer per store."""

from __future__ import annotations

from runtime.errors import ScdError


class WriterDeposed(ScdError):
    """The store was claimed by a writer with a later epoch: this process's write did not land
    and it must stop writing (a retry would be refused too)."""
