from __future__ import annotations

import pytest

from publisher.errors import InvalidRequest
from publisher.paths import is_within, join, validate_name, validate_path


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("/", "/"),
        ("/content", "/content"),
        ("/content/site/", "/content/site"),
        ("/a b/ü", "/a b/ü"),
    ],
)
def test_valid_paths_are_canonical(raw: str, canonical: str) -> None:
    assert validate_path(raw) == canonical


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("", "empty"),
        ("content", "not absolute"),
        ("/content/../etc", "path traversal"),
        ("/..", "path traversal"),
        ("/a//b", "empty or '.' segment"),
        ("/a/./b", "empty or '.' segment"),
        ("/a\\b", "backslash"),
        ("/a\x00b", "control characters"),
        ("/a\nb", "control characters"),
        ("/\udcff", "not valid UTF-8"),
        ("/" + "x" * 1100, "longer than"),
    ],
)
def test_invalid_paths_are_refused_with_the_reason(raw: str, reason: str) -> None:
    with pytest.raises(InvalidRequest, match=reason):
        validate_path(raw)


@pytest.mark.parametrize("name", ["", "a/b", "a\tb", "x" * 256, "\ud800"])
def test_invalid_property_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidRequest):
        validate_name(name)


def test_within_and_join() -> None:
    assert is_within("/a/b", "/a") and is_within("/a", "/a") and is_within("/x", "/")
    assert not is_within("/ab", "/a")
    assert join("/", "a") == "/a" and join("/a", "b") == "/a/b"
