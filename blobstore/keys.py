"""Blob keys: the one definition of what a valid key is, shared by every backend.

Keys are ``/``-separated relative paths. Both backends refuse the same keys so that code tested
against the local directory store behaves the same against S3.
"""

from __future__ import annotations

from blobstore.errors import InvalidBlobKey

# S3's own limit on an object key (UTF-8 bytes); the local backend adopts it so a key that
# works locally also works on S3.
MAX_KEY_BYTES = 1024

_FORBIDDEN_SEGMENTS = frozenset({"", ".", ".."})


def validate_key(key: str) -> str:
    """Return ``key`` unchanged if it is valid, else raise :class:`InvalidBlobKey`."""
    if not key:
        raise InvalidBlobKey(key, "the key is empty")
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        raise InvalidBlobKey(key, f"longer than {MAX_KEY_BYTES} UTF-8 bytes")
    if key.startswith("/"):
        raise InvalidBlobKey(key, "absolute paths are not allowed")
    if "\\" in key:
        raise InvalidBlobKey(key, "backslashes are not allowed (use '/')")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in key):
        raise InvalidBlobKey(key, "control characters are not allowed")
    for segment in key.split("/"):
        if segment in _FORBIDDEN_SEGMENTS:
            reason = (
                "path traversal ('..') is not allowed"
                if segment == ".."
                else f"empty or '.' path segments are not allowed (segment {segment!r})"
            )
            raise InvalidBlobKey(key, reason)
    return key


def validate_prefix(prefix: str) -> str:
    """Return ``prefix`` if some valid key could start with it, else raise InvalidBlobKey.

    The last segment may be partial (``"pkg/ab"`` matches ``"pkg/abc"``), so only the complete
    segments before the last ``/`` are checked; an empty prefix lists everything.
    """
    if not prefix:
        return prefix
    head, _, _ = prefix.rpartition("/")
    if head:
        validate_key(head)
    elif prefix.startswith("/"):
        raise InvalidBlobKey(prefix, "absolute paths are not allowed")
    if "\\" in prefix or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in prefix):
        raise InvalidBlobKey(prefix, "backslashes and control characters are not allowed")
    return prefix
