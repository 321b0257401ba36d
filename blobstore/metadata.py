"""User metadata on blobs: what every backend can keep exactly as given.

S3 carries user metadata as HTTP headers: names are case-insensitive (servers return them in
lower case), values must be header-safe ASCII and lose surrounding blanks. Metadata outside
those rules would come back changed, so it is refused up front, on every backend.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from blobstore.errors import InvalidBlobMetadata

# S3 limits user-defined metadata to 2 KB, counted as the UTF-8 bytes of all names and values.
MAX_METADATA_BYTES = 2048

_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]*")
_VALUE = re.compile(r"([\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?)?")


def validate_metadata(metadata: Mapping[str, str] | None) -> dict[str, str]:
    """Return a plain copy of ``metadata`` or raise :class:`InvalidBlobMetadata`."""
    if not metadata:
        return {}
    total = 0
    for name, value in metadata.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise InvalidBlobMetadata(
                f"metadata name {name!r} is invalid: use lower-case ASCII letters, digits, "
                "'-', '_' and '.', starting with a letter or digit"
            )
        if not isinstance(value, str) or not _VALUE.fullmatch(value):
            raise InvalidBlobMetadata(
                f"metadata value {value!r} of {name!r} is invalid: use printable ASCII "
                "without leading or trailing blanks"
            )
        total += len(name) + len(value)
    if total > MAX_METADATA_BYTES:
        raise InvalidBlobMetadata(
            f"metadata totals {total} bytes, more than the {MAX_METADATA_BYTES}-byte limit"
        )
    return dict(metadata)


DEFAULT_CONTENT_TYPE = "application/octet-stream"

# Content types travel as an HTTP header too; real ones are far shorter than this.
MAX_CONTENT_TYPE_BYTES = 255

_CONTENT_TYPE = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?")


def validate_content_type(content_type: str | None) -> str:
    """Return the content type to store (the default when None) or raise InvalidBlobMetadata."""
    if content_type is None:
        return DEFAULT_CONTENT_TYPE
    if len(content_type) > MAX_CONTENT_TYPE_BYTES or not _CONTENT_TYPE.fullmatch(content_type):
        raise InvalidBlobMetadata(
            f"content type {content_type!r} is invalid: use at most {MAX_CONTENT_TYPE_BYTES} "
            "printable ASCII characters without leading or trailing blanks"
        )
    return content_type
