"""Errors of the publisher agent, under the root :class:`runtime.errors.ScdError`.

Each maps to one HTTP status in the REST API (publisher/api/errors.py); ``retriable`` says
whether the same request may succeed later.
"""

from __future__ import annotations

from runtime.errors import ScdError


class PublisherError(ScdError):
    """A publisher operation was refused or failed."""


class InvalidRequest(PublisherError):
    """The request is well-formed but asks for something invalid (empty paths, '..')."""


class ContentNotFound(PublisherError):
    """A path to export does not exist in the content source or the request."""


class PackageTooLarge(PublisherError):
    """The serialized package is larger than the configured maximum."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"package of {size} bytes exceeds the maximum package size of {limit} bytes"
        )
        self.size = size
        self.limit = limit


class QueueNotFound(PublisherError):
    """No alive subscriber has this queue name."""


class NotEditable(PublisherError):
    """A clear was asked for a subscriber that does not accept clear commands."""


class CacheFetchTimeout(PublisherError):
    """An older range of the package topic could not be fetched in time."""

    retriable = True


class BadRecord(ScdError, ValueError):
    """A decodable record whose fields are out of range: skipped, never retried."""


class PublisherUnreachable(ScdError):
    retriable = True


class PublisherRefused(ScdError):
    """The publisher answered with an HTTP error status."""

    def __init__(self, method: str, path: str, status_code: int, detail: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status_code}: {detail}")
        self.status_code = status_code
        self.detail = detail
