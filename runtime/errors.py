"""The one root exception of scd and the errors every package shares.

Every error says whether retrying the same call can help (``retriable``): a broker that is
down is worth retrying, a message that is too large for the topic never is.
"""

from __future__ import annotations


class ScdError(Exception):
    """Root of every error scd raises on purpose."""

    retriable: bool = False


class PermanentError(ScdError):
    """Input that can never be processed as it is, anywhere: retrying it cannot help, so it is
    never retried (a subscriber records the package as REMOVED_FAILED and goes on)."""


class ConfigError(ScdError):
    """Invalid or unsafe configuration; names the offending setting."""


class DecodeError(PermanentError):
    """Bytes could not be decoded into a known message or package."""


class ServerError(ScdError):
    """The HTTP server could not start (typically: the port is taken)."""
