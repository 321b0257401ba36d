"""Safe XML for FileVault packages: reading with expat, refusing what a hostile package could
use to exhaust memory or reach out (a DTD's internal subset, entity declarations, external
entities), within limits of depth, elements and attributes; and writing the escaped text
FileVault's readers expect.
"""

from __future__ import annotations

import xml.parsers.expat
from dataclasses import dataclass, field

from runtime.errors import DecodeError

MAX_DEPTH = 600  # deeper than any path of 1024 bytes can reach
_NS_SEP = "\x1f"  # expat's separator of URI, local name and prefix


@dataclass
class Element:
    """An element: its name (uri, local, prefix), attributes by (uri, local, prefix), text and
    children, and the namespaces declared in scope where it starts."""

    name: tuple[str, str, str]
    attributes: dict[tuple[str, str, str], str]
    namespaces: dict[str, str]
    children: list[Element] = field(default_factory=list)
    text: list[str] = field(default_factory=list)


def _split(name: str) -> tuple[str, str, str]:
    parts = name.split(_NS_SEP)
    if len(parts) == 1:
        return "", parts[0], ""
    if len(parts) == 2:
        return parts[0], parts[1], ""
    return parts[0], parts[1], parts[2]


class _Builder:
    """expat's handlers: the element tree, within the limits, refusing DTD tricks."""

    def __init__(self, what: str, max_elements: int, max_attributes: int) -> None:
        self.what = what
        self.max_elements = max_elements
        self.max_attributes = max_attributes
        self.stack: list[Element] = []
        self.roots: list[Element] = []
        self.scopes: list[dict[str, str]] = [{}]
        self.pending: dict[str, str] = {}
        self.count = 0

    def refuse(self, reason: str) -> DecodeError:
        return DecodeError(f"{self.what}: {reason}; refused")

    def doctype(self, _name: str, _sys: str | None, _pub: str | None, internal: int) -> None:
        if internal:
            raise self.refuse("a DTD internal subset")

    def entity(self, *_: object) -> None:
        raise self.refuse("an entity declaration")

    def external(self, *_: object) -> int:
        raise self.refuse("an external entity")

    def start_ns(self, prefix: str | None, uri: str) -> None:
        self.pending[prefix or ""] = uri

    def start(self, name: str, attrs: dict[str, str]) -> None:
        self.count += 1
        if self.count > self.max_elements:
            raise self.refuse(f"more than {self.max_elements} elements")
        if len(self.stack) >= MAX_DEPTH:
            raise self.refuse(f"elements nested deeper than {MAX_DEPTH}")
        if len(attrs) > self.max_attributes:
            raise self.refuse(f"an element with more than {self.max_attributes} attributes")
        scope = {**self.scopes[-1], **self.pending}
        self.pending.clear()
        self.scopes.append(scope)
        element = Element(_split(name), {_split(k): v for k, v in attrs.items()}, scope)
        (self.stack[-1].children if self.stack else self.roots).append(element)
        self.stack.append(element)

    def end(self, _name: str) -> None:
        self.stack.pop()
        self.scopes.pop()

    def text(self, data: str) -> None:
        if self.stack:
            self.stack[-1].text.append(data)


def parse(data: bytes, what: str, *, max_elements: int, max_attributes: int) -> Element:
    """The root element of ``data``; raises DecodeError naming ``what`` and the reason."""
    parser = xml.parsers.expat.ParserCreate("UTF-8", namespace_separator=_NS_SEP)
    parser.namespace_prefixes = True
    parser.SetParamEntityParsing(xml.parsers.expat.XML_PARAM_ENTITY_PARSING_NEVER)
    builder = _Builder(what, max_elements, max_attributes)
    parser.StartDoctypeDeclHandler = builder.doctype
    parser.EntityDeclHandler = builder.entity
    parser.ExternalEntityRefHandler = builder.external
    parser.SkippedEntityHandler = builder.entity
    parser.StartNamespaceDeclHandler = builder.start_ns
    parser.StartElementHandler = builder.start
    parser.EndElementHandler = builder.end
    parser.CharacterDataHandler = builder.text
    try:
        parser.Parse(data, True)
    except xml.parsers.expat.ExpatError as exc:
        raise DecodeError(f"{what}: not well-formed XML ({exc})") from None
    if not builder.roots:
        raise DecodeError(f"{what}: no root element")
    return builder.roots[0]


def attribute(text: str) -> str:
    """``text`` as a double-quoted attribute value (white space kept as character references,
    which attribute-value normalisation leaves alone)."""
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("\t", "&#9;")
        .replace("\n", "&#10;")
        .replace("\r", "&#13;")
    )


def text_content(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")
    )
