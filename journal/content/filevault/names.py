"""JCR names in a FileVault package: as zip entry names (FileVault's platform name format:
``jcr:content`` is ``_jcr_content``, ``%`` escapes such as ``%3a``) and as XML names (ISO 9075:
``_xHHHH_`` for a character an XML name cannot hold).

scd writes a name only when FileVault can represent it (:func:`check_jcr_name`); it reads what
FileVault writes.
"""

from __future__ import annotations

import re

from runtime.errors import DecodeError

_PLATFORM_ESCAPED = frozenset('\\<>|"/?%')
_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_JCR_FORBIDDEN = frozenset("/:[]|*")
_ISO9075_ESCAPE = re.compile(r"_x([0-9A-Fa-f]{4})_")
_ISO9075_LOOKALIKE = re.compile(r"x[0-9A-Fa-f]{4}")
_XML_NAME_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.")
# Zip entry names FileVault gives a meaning of its own (a file's extra directory, a docview,
# a binary property): a node of that name could not be told apart.
_RESERVED_SUFFIXES = (".dir", ".binary")
_RESERVED_NAMES = frozenset({".content.xml"})


def check_jcr_name(name: str, what: str) -> str:
    """``name`` if FileVault can write it: ``[prefix:]local``, a prefix of XML name characters,
    a local name without ``/ : [ ] | *``, not ``.``/``..``, no leading or trailing space, no
    name that FileVault's layout reserves and none that its file names would read back as
    another; raises ValueError naming the problem."""
    prefix, _, local = name.rpartition(":")
    if ":" in prefix or (prefix and not _PREFIX.fullmatch(prefix)) or prefix == "xmlns":
        raise ValueError(f"{what} {name!r} has no valid JCR namespace prefix")
    if not local or local in (".", "..") or any(ch in _JCR_FORBIDDEN for ch in local):
        raise ValueError(f"{what} {name!r} is not a valid JCR name (no / : [ ] | * . ..)")
    if local != local.strip():
        raise ValueError(f"{what} {name!r} starts or ends with white space")
    if name in _RESERVED_NAMES or name.endswith(_RESERVED_SUFFIXES):
        raise ValueError(f"{what} {name!r} is reserved by FileVault's package layout")
    # FileVault reads the character after a leading "_" unescaped: "_<" is written "_%3c" and
    # read back as "_%3c". A name it would misread is refused, never imported under another.
    back = repository_name(platform_name(name))
    if back != name:
        raise ValueError(f"{what} {name!r} would read back from FileVault's file names as {back!r}")
    return name


def platform_name(name: str) -> str:
    """A JCR name as FileVault writes it in a zip entry name."""
    out = ["_"]
    colon_escaped = False
    leading_underscore = False
    underscores = 0
    for i, ch in enumerate(name):
        if ch == ":" and not colon_escaped and i > 0:
            colon_escaped = True
            leading_underscore = True
            underscores = 2
            out.append("_")
        elif ch == ":":
            colon_escaped = True
            out.append("%3a")
        elif ch == "_":
            leading_underscore = leading_underscore or i == 0
            underscores += 1
            colon_escaped = True
            out.append("_")
        elif ch in _PLATFORM_ESCAPED:
            out.append(f"%{ord(ch):02x}")
        else:
            out.append(ch)
    text = "".join(out)
    return text if leading_underscore and underscores > 1 else text[1:]


def repository_name(platform: str) -> str:
    """The JCR name a zip entry name stands for (FileVault's reading of it)."""
    out = ["_"]
    pending_underscore = False
    i = 0
    while i < len(platform):
        ch = platform[i]
        if ch == "%" and len(platform) > i + 2:
            digits = platform[i + 1 : i + 3]
            try:
                ch = chr(int(digits, 16))
            except ValueError:
                raise DecodeError(f"entry name {platform!r}: broken %-escape") from None
            i += 2
        elif ch == "_" and i == 0:
            pending_underscore = True
            if len(platform) > 1:
                i += 1
                if platform[i] == "_":
                    pending_underscore = False
                out.append(platform[i])
            i += 1
            continue
        elif ch == "_" and pending_underscore:
            ch = ":"
            pending_underscore = False
        out.append(ch)
        i += 1
    text = "".join(out)
    return text if pending_underscore else text[1:]


def xml_local_name(local: str) -> str:
    """An XML-safe form of a local name (ISO 9075): characters outside ASCII letters, digits,
    ``_ - .`` (and a leading digit, ``-`` or ``.``) become ``_xHHHH_`` per UTF-16 unit, and an
    ``_`` that would read as such an escape is escaped itself."""
    out: list[str] = []
    for i, ch in enumerate(local):
        lookalike = ch == "_" and _ISO9075_LOOKALIKE.match(local, i + 1) is not None
        if ch in _XML_NAME_SAFE and not lookalike and not (i == 0 and ch in "0123456789-."):
            out.append(ch)
            continue
        data = ch.encode("utf-16-be", "surrogatepass")
        out.extend(f"_x{data[j : j + 2].hex()}_" for j in range(0, len(data), 2))
    return "".join(out)


def decode_xml_name(name: str) -> str:
    """The name an ISO 9075-encoded XML name stands for."""
    text = _ISO9075_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), name)
    try:
        return text.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeDecodeError:
        raise DecodeError(f"XML name {name!r} has an unpaired surrogate escape") from None
