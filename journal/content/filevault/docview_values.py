"""FileVault's docview property values, in its grammar:
``[ "{" type "}" ] ( value | "[" [ value { "," value } ] "]" )``.

The grammar of FileVault's ``DocViewProperty2`` (jackrabbit.apache.org/filevault/docview.html):
a backslash escapes the next character, ``\\uXXXX`` a UTF-16 unit, ``\\0`` alone an empty value;
a writer escapes ``\\``, a ``,`` inside a list, a leading ``[`` or ``{`` of a single value and
characters XML cannot hold. An untyped value is a String (or a Name, for jcr:primaryType and
jcr:mixinTypes). Pure text, no scd types: journal/content/filevault/values.py converts.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.errors import DecodeError

BINARY_REF = "BinaryRef"
# JCR's PropertyType names as FileVault writes them, and BinaryRef (a binary by reference).
TYPE_NAMES = frozenset(
    {
        "String",
        "Binary",
        "Long",
        "Double",
        "Date",
        "Boolean",
        "Name",
        "Path",
        "Reference",
        "WeakReference",
        "URI",
        "Decimal",
        "undefined",
        BINARY_REF,
    }
)
# Types whose values a writer escapes (the others are numbers, dates, booleans, references).
_ESCAPED_TYPES = frozenset({None, "String", "Name", "Path", "undefined"})
# Names whose type is known without a {Type}: a writer leaves it out.
_UNAMBIGUOUS = frozenset({"jcr:primaryType", "jcr:mixinTypes"})


@dataclass(frozen=True)
class DocViewProperty:
    """One attribute of a docview element: its declared type (None: none given), its values
    (always one for a single value) and whether it is a multi-value property."""

    type: str | None
    values: tuple[str, ...]
    multi: bool = False


def _xml_invalid(ch: str) -> bool:
    code = ord(ch)
    if code < 0x20:
        return ch not in "\t\n\r"
    return 0xD800 <= code <= 0xDFFF or code in (0xFFFE, 0xFFFF)


def _utf16_units(ch: str) -> list[int]:
    data = ch.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def _escape(value: str, multi: bool) -> str:
    out: list[str] = []
    for i, ch in enumerate(value):
        if ch == "\\":
            out.append("\\\\")
        elif ch == "," and multi:
            out.append("\\,")
        elif i == 0 and not multi and ch in "[{":
            out.append("\\" + ch)
        elif _xml_invalid(ch):
            out.extend(f"\\u{unit:04x}" for unit in _utf16_units(ch))
        else:
            out.append(ch)
    return "".join(out)


def format_property(name: str, prop: DocViewProperty) -> str:
    """The attribute value FileVault writes for ``prop`` on a property called ``name``."""
    head = ""
    if prop.type not in (None, "String", "undefined") and name not in _UNAMBIGUOUS:
        head = "{" + prop.type + "}"
    if len(prop.values) == 1 and prop.values[0] == "":
        body = "\\0"
    else:
        escape = prop.type in _ESCAPED_TYPES
        body = ",".join(_escape(v, prop.multi) if escape else v for v in prop.values)
    return head + ("[" + body + "]" if prop.multi else body)


def _joined(units: list[str]) -> str:
    """Characters, some of them UTF-16 surrogates from \\u escapes, as one string; a surrogate
    without its pair is refused."""
    text = "".join(units)
    try:
        return text.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeDecodeError:
        raise DecodeError("docview value has an unpaired \\u surrogate escape") from None


def _type_of(text: str) -> tuple[str | None, int]:
    """The declared ``{Type}`` of a value and where its value starts."""
    if not text.startswith("{"):
        return None, 0
    end = text.find("}")
    if end < 0:
        raise DecodeError(f"docview value {text[:80]!r}: '{{' without '}}'")
    ptype = text[1:end]
    if ptype not in TYPE_NAMES:
        raise DecodeError(f"docview value {text[:80]!r}: unknown type {ptype!r}")
    return ptype, end + 1


def _unescaped(text: str, pos: int) -> tuple[str | None, int]:
    """The character a backslash at ``pos - 1`` escapes (None for ``\\0``, the empty marker)
    and the position after the escape."""
    ch = text[pos]
    if ch == "0":
        return None, pos + 1
    if ch != "u":
        return ch, pos + 1
    digits = text[pos + 1 : pos + 5]
    if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
        raise DecodeError(f"docview value {text[:80]!r}: broken \\u escape")
    return chr(int(digits, 16)), pos + 5


def parse_property(text: str) -> DocViewProperty:
    """A docview attribute value, as FileVault reads it; raises DecodeError for an unknown
    type or a broken escape."""
    ptype, pos = _type_of(text)
    multi = text.startswith("[", pos)
    pos += multi
    values: list[str] | None = None
    current: list[str] = []
    while pos < len(text):
        ch = text[pos]
        pos += 1
        if ch == "\\":
            if pos >= len(text):
                break
            escaped, pos = _unescaped(text, pos)
            if escaped is None:
                values = values if values is not None else []
            else:
                current.append(escaped)
        elif multi and (ch == "," or (ch == "]" and pos == len(text))):
            if ch == "," or current or values is not None:
                values = (values if values is not None else []) + [_joined(current)]
                current = []
        else:
            current.append(ch)
    if not multi:
        return DocViewProperty(ptype, (_joined(current),), False)
    if current:
        values = (values if values is not None else []) + [_joined(current)]
    return DocViewProperty(ptype, tuple(values or ()), True)
