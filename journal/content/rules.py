"""The content rules: what a content package may hold, checked by the publisher before it sends
a package and by the subscriber before it imports one.

The publisher refuses a request breaking a rule (400); a subscriber treats a package breaking
one as a permanent failure (it can never be imported anywhere, so it is never retried). Both
sides run the same checks, so every package the publisher accepts is one every subscriber's
store accepts.

Every error names the node path, the property (when there is one) and the rule.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from journal.content.package import (
    FILEVAULT_PACKAGE_TYPE,
    MAX_DECODED_BYTES,
    PACKAGE_TYPE,
    Binary,
    ContentPackage,
    Node,
    Value,
)
from journal.wire.journal_pb2 import PackageMessage, ReqType
from runtime.errors import PermanentError

# Rule names, as errors and documentation cite them.
PATH_SYNTAX = "path-syntax"
NAME_SYNTAX = "name-syntax"
VALUE_TYPE = "value-type"
MULTI_VALUE_TYPE = "multi-value-type"
DATE_RANGE = "date-range"
FINITE_DOUBLE = "finite-double"
BINARY_PLACEMENT = "binary-placement"
BLOB_REFERENCE = "blob-reference"
VALUE_LENGTH = "value-length"
MULTI_VALUE_COUNT = "multi-value-count"
PROPERTY_COUNT = "property-count"
NODE_COUNT = "node-count"
FILTER_ROOTS = "filter-roots"
PACKAGE_SIZE = "package-size"
MESSAGE_FIELDS = "message-fields"

# Dates are ISO-8601 years 0001..9999 (what Spark, Java and Python all represent).
MIN_DATE_MS = -62_135_596_800_000  # 0001-01-01T00:00:00.000Z
MAX_DATE_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
# Content types travel as blob metadata and HTTP headers: printable ASCII.
_CONTENT_TYPE = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_KNOWN_REQ_TYPES = frozenset(ReqType.values())


@dataclass(frozen=True)
class ContentLimits:
    """Sizes a package may reach. The defaults hold far beyond real content trees and keep a
    hostile package's cost in memory bounded; a subscriber's limits must be at least its
    publisher's."""

    max_path_bytes: int = 1024  # UTF-8 bytes of a node path
    max_name_chars: int = 255  # a property name or a path segment
    max_value_bytes: int = 4 * 1024 * 1024  # a string value or an inline binary
    max_multi_values: int = 10_000  # values of one multi-value property
    max_properties: int = 1_000  # properties of one node
    max_nodes: int = 100_000  # nodes of one package
    max_roots: int = 10_000  # filter roots (paths) of one package
    max_package_bytes: int = MAX_DECODED_BYTES  # a package decoded (uncompressed)
    max_content_type_chars: int = 255


DEFAULT_LIMITS = ContentLimits()


class ContentRuleError(PermanentError):
    """Content breaking a rule; says where (node path, property) and which rule."""

    def __init__(
        self, rule: str, detail: str, *, path: str | None = None, prop: str | None = None
    ) -> None:
        where = []
        if path is not None:
            where.append(f"node {_shown(path)}")
        if prop is not None:
            where.append(f"property {_shown(prop)}")
        prefix = ": ".join(where)
        super().__init__(f"{prefix + ': ' if prefix else ''}{detail} (rule {rule})")
        self.rule = rule
        self.path = path
        self.prop = prop
        self.detail = detail


def _shown(text: str, limit: int = 200) -> str:
    """Text quoted for an error message: escaped, and cut so a huge value stays a short line."""
    shown = repr(text if len(text) <= limit else text[:limit] + "...")
    return shown.encode("ascii", "backslashreplace").decode("ascii")


def _has_control(text: str) -> bool:
    return any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text)


def _utf8_length(text: str, rule: str, what: str, path: str | None, prop: str | None) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ContentRuleError(
            rule, f"{what} is not valid UTF-8 ({exc.reason})", path=path, prop=prop
        ) from None


# ------------------------------------------------------------------ paths and names
def canonical_path(path: str, what: str = "path", limits: ContentLimits = DEFAULT_LIMITS) -> str:
    """``path`` without a trailing slash, checked; the form every package carries."""
    trimmed = path[:-1] if len(path) > 1 and path.endswith("/") else path
    check_path(trimmed, what, limits)
    return trimmed


def check_path(path: str, what: str = "path", limits: ContentLimits = DEFAULT_LIMITS) -> str:
    """An absolute path of ``/``-separated segments: no empty, ``.`` or ``..`` segment, no
    control character or backslash, valid UTF-8, at most ``max_path_bytes``."""

    def refuse(detail: str) -> ContentRuleError:
        return ContentRuleError(PATH_SYNTAX, f"{what} {_shown(path)} {detail}")

    size = _utf8_length(path, PATH_SYNTAX, f"{what} {_shown(path)}", None, None)
    if not path:
        raise ContentRuleError(PATH_SYNTAX, f"{what} is empty")
    if not path.startswith("/"):
        raise refuse("is not absolute (must start with '/')")
    if size > limits.max_path_bytes:
        raise refuse(f"is longer than {limits.max_path_bytes} UTF-8 bytes")
    if "\\" in path:
        raise refuse("contains a backslash (use '/')")
    if _has_control(path):
        raise refuse("contains control characters")
    if path != "/":
        for segment in path[1:].split("/"):
            problem = _segment_problem(segment, limits)
            if problem is not None:
                raise refuse(problem)
    return path


def _segment_problem(segment: str, limits: ContentLimits) -> str | None:
    if segment == "..":
        return "contains '..' (path traversal)"
    if segment in ("", "."):
        return "has an empty or '.' segment"
    if len(segment) > limits.max_name_chars:
        return f"has a segment longer than {limits.max_name_chars} characters"
    return None


def check_name(
    name: str, what: str = "property name", limits: ContentLimits = DEFAULT_LIMITS
) -> str:
    _utf8_length(name, NAME_SYNTAX, f"{what} {_shown(name)}", None, None)
    if not name or len(name) > limits.max_name_chars:
        raise ContentRuleError(NAME_SYNTAX, f"{what} must have 1 to {limits.max_name_chars} chars")
    if "/" in name or _has_control(name):
        raise ContentRuleError(
            NAME_SYNTAX, f"{what} {_shown(name)} contains '/' or control characters"
        )
    return name


def check_text(text: str, what: str) -> str:
    """Text that must encode as UTF-8 (no lone surrogates): metadata, user ids, file names."""
    _utf8_length(text, NAME_SYNTAX, f"{what} {_shown(text)}", None, None)
    return text


def is_within(path: str, root: str) -> bool:
    """True when ``path`` is ``root`` or below it (both canonical)."""
    return root == "/" or path == root or path.startswith(root + "/")


def join(parent: str, name: str) -> str:
    return f"/{name}" if parent == "/" else f"{parent}/{name}"


# ------------------------------------------------------------------ values
def scalar_type(value: Value) -> str | None:
    """The type name of a scalar value (string, long, double, bool, date); None otherwise."""
    kind = value.WhichOneof("kind")
    return {
        "string_value": "string",
        "long_value": "long",
        "double_value": "double",
        "bool_value": "bool",
        "date_ms": "date",
    }.get(kind or "")


def check_date_ms(ms: int, path: str | None = None, prop: str | None = None) -> int:
    if not MIN_DATE_MS <= ms <= MAX_DATE_MS:
        raise ContentRuleError(
            DATE_RANGE,
            f"date {ms} ms is outside 0001-01-01T00:00:00Z..9999-12-31T23:59:59.999Z",
            path=path,
            prop=prop,
        )
    return ms


def check_content_type(
    text: str, path: str | None, prop: str | None, limits: ContentLimits = DEFAULT_LIMITS
) -> str:
    if len(text) > limits.max_content_type_chars or not _CONTENT_TYPE.fullmatch(text):
        raise ContentRuleError(
            VALUE_TYPE,
            f"content type {_shown(text)} is invalid: use at most "
            f"{limits.max_content_type_chars} printable ASCII characters",
            path=path,
            prop=prop,
        )
    return text


def _check_scalar(value: Value, path: str, prop: str, limits: ContentLimits) -> str:
    vtype = scalar_type(value)
    if vtype == "string":
        size = _utf8_length(value.string_value, VALUE_TYPE, "the string", path, prop)
        if size > limits.max_value_bytes:
            raise ContentRuleError(
                VALUE_LENGTH,
                f"string of {size} bytes exceeds {limits.max_value_bytes}",
                path=path,
                prop=prop,
            )
    elif vtype == "double" and not math.isfinite(value.double_value):
        raise ContentRuleError(
            FINITE_DOUBLE, f"{value.double_value} is not a finite number", path=path, prop=prop
        )
    elif vtype == "date":
        check_date_ms(value.date_ms, path, prop)
    elif vtype is None:
        kind = value.WhichOneof("kind")
        if kind is None:
            raise ContentRuleError(VALUE_TYPE, "value has no type", path=path, prop=prop)
        raise ContentRuleError(
            BINARY_PLACEMENT if kind == "binary_value" else MULTI_VALUE_TYPE,
            f"a multi-value property holds scalars only, not a {kind.removesuffix('_value')}",
            path=path,
            prop=prop,
        )
    return vtype


def _check_binary(binary: Binary, path: str, prop: str, limits: ContentLimits) -> None:
    if binary.content_type:
        check_content_type(binary.content_type, path, prop, limits)
    which = binary.WhichOneof("data")
    if which == "inline":
        if len(binary.inline) > limits.max_value_bytes:
            raise ContentRuleError(
                VALUE_LENGTH,
                f"inline binary of {len(binary.inline)} bytes exceeds {limits.max_value_bytes}",
                path=path,
                prop=prop,
            )
        return
    if which is None:
        raise ContentRuleError(
            BLOB_REFERENCE, "binary has neither data nor a reference", path=path, prop=prop
        )
    ref = binary.ref
    if (
        not ref.key
        or len(ref.key) > limits.max_path_bytes
        or _has_control(ref.key)
        or ".." in ref.key.split("/")
        or ref.key.startswith("/")
    ):
        raise ContentRuleError(
            BLOB_REFERENCE, f"blob key {_shown(ref.key)} is invalid", path=path, prop=prop
        )
    if ref.size < 0:
        raise ContentRuleError(
            BLOB_REFERENCE, f"blob size {ref.size} is negative", path=path, prop=prop
        )
    if ref.sha256 and not _SHA256_HEX.fullmatch(ref.sha256):
        raise ContentRuleError(
            BLOB_REFERENCE, "blob sha256 is not 64 lowercase hex digits", path=path, prop=prop
        )
    if ref.content_type:
        check_content_type(ref.content_type, path, prop, limits)


def check_value(value: Value, path: str, prop: str, limits: ContentLimits = DEFAULT_LIMITS) -> None:
    """A property value: a scalar, a binary (not inside a list), or a multi-value list of
    scalars of one type."""
    kind = value.WhichOneof("kind")
    if kind == "binary_value":
        _check_binary(value.binary_value, path, prop, limits)
    elif kind == "multi_value":
        items = value.multi_value.values
        if len(items) > limits.max_multi_values:
            raise ContentRuleError(
                MULTI_VALUE_COUNT,
                f"{len(items)} values exceed {limits.max_multi_values}",
                path=path,
                prop=prop,
            )
        types = {_check_scalar(item, path, prop, limits) for item in items}
        if len(types) > 1:
            raise ContentRuleError(
                MULTI_VALUE_TYPE,
                f"a multi-value property holds one type, not {' and '.join(sorted(types))}",
                path=path,
                prop=prop,
            )
    else:
        _check_scalar(value, path, prop, limits)


def check_node(node: Node, limits: ContentLimits = DEFAULT_LIMITS) -> Node:
    check_path(node.path, "node path", limits)
    if len(node.properties) > limits.max_properties:
        raise ContentRuleError(
            PROPERTY_COUNT,
            f"{len(node.properties)} properties exceed {limits.max_properties}",
            path=node.path,
        )
    for prop, value in node.properties.items():
        try:
            check_name(prop, "property name", limits)
        except ContentRuleError as exc:
            raise ContentRuleError(exc.rule, exc.detail, path=node.path) from None
        check_value(value, node.path, prop, limits)
    return node


# ------------------------------------------------------------------ packages
def check_roots(
    roots: Iterable[tuple[str, bool]], limits: ContentLimits = DEFAULT_LIMITS
) -> list[tuple[str, bool]]:
    checked = [(check_path(path, "filter root", limits), deep) for path, deep in roots]
    if len(checked) > limits.max_roots:
        raise ContentRuleError(FILTER_ROOTS, f"{len(checked)} roots exceed {limits.max_roots}")
    return checked


def check_package(
    package: ContentPackage, req_type: int, limits: ContentLimits = DEFAULT_LIMITS
) -> ContentPackage:
    """Every rule for a decoded package distributed with ``req_type``: its roots, its nodes,
    and that an ADD's nodes lie within its roots (other actions carry none)."""
    if req_type not in _KNOWN_REQ_TYPES:
        raise ContentRuleError(MESSAGE_FIELDS, f"unknown request type {req_type}")
    if package.req_type != req_type:
        raise ContentRuleError(
            MESSAGE_FIELDS,
            f"package request type {package.req_type} differs from its message's {req_type}",
        )
    roots = check_roots(((r.path, r.deep) for r in package.roots), limits)
    if len(package.nodes) > limits.max_nodes:
        raise ContentRuleError(NODE_COUNT, f"{len(package.nodes)} nodes exceed {limits.max_nodes}")
    if package.nodes and req_type != ReqType.ADD:
        raise ContentRuleError(FILTER_ROOTS, "only an ADD package carries nodes")
    seen: set[str] = set()
    for node in package.nodes:
        check_node(node, limits)
        if node.path in seen:
            raise ContentRuleError(FILTER_ROOTS, "node is given twice", path=node.path)
        seen.add(node.path)
        if not any(is_within(node.path, r) if deep else node.path == r for r, deep in roots):
            raise ContentRuleError(
                FILTER_ROOTS, "node is outside the package's filter roots", path=node.path
            )
    return package


def check_package_message(
    message: PackageMessage, limits: ContentLimits = DEFAULT_LIMITS
) -> PackageMessage:
    """The fields of a PackageMessage a subscriber relies on before reading its package."""
    if message.req_type not in _KNOWN_REQ_TYPES:
        raise ContentRuleError(MESSAGE_FIELDS, f"unknown request type {message.req_type}")
    if message.pkg_type not in (PACKAGE_TYPE, FILEVAULT_PACKAGE_TYPE):
        raise ContentRuleError(
            MESSAGE_FIELDS,
            f"package type {_shown(message.pkg_type)} is neither {PACKAGE_TYPE!r} nor "
            f"{FILEVAULT_PACKAGE_TYPE!r}",
        )
    if message.pkg_length < 0 or message.pkg_length > limits.max_package_bytes:
        raise ContentRuleError(
            PACKAGE_SIZE,
            f"declared package length {message.pkg_length} is outside "
            f"0..{limits.max_package_bytes}",
        )
    if message.pkg_binary_ref and not message.pkg_length:
        raise ContentRuleError(PACKAGE_SIZE, "a package stored by reference declares no length")
    return message
