"""The content rules of journal/content/rules.py, shared by publisher and subscriber."""

from __future__ import annotations

import pytest

from journal.content import rules
from journal.content.package import (
    Binary,
    BlobRef,
    ContentPackage,
    FilterRoot,
    MultiValue,
    Node,
    Value,
)
from journal.content.rules import (
    ContentRuleError,
    check_name,
    check_node,
    check_package,
    is_within,
    join,
)
from runtime.errors import PermanentError


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
    assert rules.canonical_path(raw) == canonical


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
        ("/" + "x" * 256, "segment longer than"),
    ],
)
def test_invalid_paths_are_refused_with_the_reason(raw: str, reason: str) -> None:
    with pytest.raises(ContentRuleError, match=reason) as caught:
        rules.canonical_path(raw)
    assert caught.value.rule == rules.PATH_SYNTAX


@pytest.mark.parametrize("name", ["", "a/b", "a\tb", "x" * 256, "\ud800"])
def test_invalid_property_names_are_refused(name: str) -> None:
    with pytest.raises(ContentRuleError):
        check_name(name)


def test_within_and_join() -> None:
    assert is_within("/a/b", "/a")
    assert is_within("/a", "/a")
    assert is_within("/x", "/")
    assert not is_within("/ab", "/a")
    assert join("/", "a") == "/a"
    assert join("/a", "b") == "/a/b"


def node(path: str = "/p", **props: Value) -> Node:
    n = Node(path=path)
    for name, value in props.items():
        n.properties[name].CopyFrom(value)
    return n


def multi(*values: Value) -> Value:
    return Value(multi_value=MultiValue(values=list(values)))


@pytest.mark.parametrize(
    ("value", "rule", "text"),
    [
        (
            multi(Value(string_value="a"), Value(long_value=1)),
            rules.MULTI_VALUE_TYPE,
            "long and string",
        ),
        (Value(date_ms=rules.MAX_DATE_MS + 1), rules.DATE_RANGE, "outside"),
        (Value(date_ms=rules.MIN_DATE_MS - 1), rules.DATE_RANGE, "outside"),
        (multi(Value(binary_value=Binary(inline=b"x"))), rules.BINARY_PLACEMENT, "scalars only"),
        (multi(multi(Value(long_value=1))), rules.MULTI_VALUE_TYPE, "scalars only"),
        (Value(double_value=float("nan")), rules.FINITE_DOUBLE, "finite"),
        (Value(double_value=float("inf")), rules.FINITE_DOUBLE, "finite"),
        (Value(), rules.VALUE_TYPE, "no type"),
        (Value(string_value="x" * (4 * 1024 * 1024 + 1)), rules.VALUE_LENGTH, "exceeds"),
        (
            Value(binary_value=Binary(inline=b"x" * (4 * 1024 * 1024 + 1))),
            rules.VALUE_LENGTH,
            "exceeds",
        ),
        (Value(binary_value=Binary()), rules.BLOB_REFERENCE, "neither"),
        (
            Value(binary_value=Binary(ref=BlobRef(key="../etc", size=1))),
            rules.BLOB_REFERENCE,
            "invalid",
        ),
        (
            Value(binary_value=Binary(ref=BlobRef(key="k", size=-1))),
            rules.BLOB_REFERENCE,
            "negative",
        ),
        (
            Value(binary_value=Binary(ref=BlobRef(key="k", size=1, sha256="zz"))),
            rules.BLOB_REFERENCE,
            "hex",
        ),
        (
            Value(binary_value=Binary(inline=b"", content_type="a\nb")),
            rules.VALUE_TYPE,
            "content type",
        ),
    ],
)
def test_bad_values_name_node_property_and_rule(value: Value, rule: str, text: str) -> None:
    with pytest.raises(ContentRuleError, match=text) as caught:
        check_node(node("/n", m=value))
    error = caught.value
    assert (error.rule, error.path, error.prop) == (rule, "/n", "m")
    assert "/n" in str(error)
    assert "'m'" in str(error)
    assert rule in str(error)
    assert isinstance(error, PermanentError)


def test_good_values_pass() -> None:
    good = node(
        "/n",
        s=Value(string_value="ü\x00"),
        l=Value(long_value=-(2**63)),
        d=Value(double_value=-0.0),
        b=Value(bool_value=False),
        t=Value(date_ms=rules.MAX_DATE_MS),
        e=multi(),
        m=multi(Value(date_ms=0), Value(date_ms=rules.MIN_DATE_MS)),
        r=Value(binary_value=Binary(ref=BlobRef(key="blobs/ab", size=3, sha256="a" * 64))),
    )
    assert check_node(good) is good


def test_too_many_properties() -> None:
    many = node("/n", **{f"p{i}": Value(long_value=i) for i in range(1001)})
    with pytest.raises(ContentRuleError, match="1001 properties"):
        check_node(many)


def package(req_type: int, roots: list[tuple[str, bool]], nodes: list[Node]) -> ContentPackage:
    pkg = ContentPackage(package_id="x", req_type=req_type)  # type: ignore[arg-type]
    pkg.roots.extend(FilterRoot(path=p, deep=d) for p, d in roots)
    pkg.nodes.extend(nodes)
    return pkg


def test_package_rules() -> None:
    ok = package(0, [("/a", True), ("/b", False)], [node("/a/x"), node("/b")])
    assert check_package(ok, 0) is ok
    with pytest.raises(ContentRuleError, match="outside"):
        check_package(package(0, [("/b", False)], [node("/b/x")]), 0)
    with pytest.raises(ContentRuleError, match="twice"):
        check_package(package(0, [("/a", True)], [node("/a/x"), node("/a/x")]), 0)
    with pytest.raises(ContentRuleError, match="only an ADD"):
        check_package(package(1, [("/a", True)], [node("/a/x")]), 1)
    with pytest.raises(ContentRuleError, match="unknown request type 200"):
        check_package(package(0, [("/a", True)], []), 200)
    with pytest.raises(ContentRuleError, match="differs"):
        check_package(package(0, [("/a", True)], []), 1)
    with pytest.raises(ContentRuleError, match="filter root"):
        check_package(package(1, [("/a/../b", True)], []), 1)
