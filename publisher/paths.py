"""Content paths: the one definition of a valid repository path.

A path is absolute (``/content/site``), ``/``-separated, without empty, ``.`` or ``..``
segments, control characters or backslashes, and encodable as UTF-8. Every path a request
names, every node path and every file name read from the content source passes through here,
so ``..`` can never reach a file system or a subscriber's store.
"""

from __future__ import annotations

from publisher.errors import InvalidRequest

# Longest path accepted, in UTF-8 bytes: far beyond real content trees, small enough that a
# hostile request cannot make every queue item huge.
MAX_PATH_BYTES = 1024
# Longest property name, in characters (JCR names are rarely longer than a few dozen).
MAX_NAME_CHARS = 255


def _has_control(text: str) -> bool:
    return any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text)


def check_utf8(text: str, what: str) -> None:
    """Refuse text that cannot be encoded as UTF-8 (lone surrogates, undecodable file names)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidRequest(
            f"{what} {text.encode('utf-8', 'backslashreplace').decode('ascii', 'replace')!r} "
            f"is not valid UTF-8 ({exc.reason})"
        ) from None


def validate_path(path: str, what: str = "path") -> str:
    """Return ``path`` in canonical form (no trailing slash) or raise InvalidRequest."""
    check_utf8(path, what)
    if not path:
        raise InvalidRequest(f"{what} is empty")
    if not path.startswith("/"):
        raise InvalidRequest(f"{what} {path!r} is not absolute (must start with '/')")
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        raise InvalidRequest(f"{what} is longer than {MAX_PATH_BYTES} UTF-8 bytes")
    if "\\" in path:
        raise InvalidRequest(f"{what} {path!r} contains a backslash (use '/')")
    if _has_control(path):
        raise InvalidRequest(f"{what} {path!r} contains control characters")
    if path == "/":
        return path
    trimmed = path[:-1] if path.endswith("/") else path
    for segment in trimmed[1:].split("/"):
        if segment == "..":
            raise InvalidRequest(f"{what} {path!r}: path traversal ('..') is not allowed")
        if segment in ("", "."):
            raise InvalidRequest(f"{what} {path!r} has an empty or '.' segment")
    return trimmed


def validate_name(name: str, what: str = "property name") -> str:
    check_utf8(name, what)
    if not name or len(name) > MAX_NAME_CHARS:
        raise InvalidRequest(f"{what} must have 1 to {MAX_NAME_CHARS} characters")
    if "/" in name or _has_control(name):
        raise InvalidRequest(f"{what} {name!r} contains '/' or control characters")
    return name


def is_within(path: str, root: str) -> bool:
    """True when ``path`` is ``root`` or below it (both canonical)."""
    if root == "/":
        return True
    return path == root or path.startswith(root + "/")


def join(parent: str, name: str) -> str:
    return f"/{name}" if parent == "/" else f"{parent}/{name}"
