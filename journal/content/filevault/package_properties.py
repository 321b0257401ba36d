"""META-INF/vault/properties.xml: the package's properties, in the XML form of Java's
``Properties.storeToXML`` (FileVault reads it with ``Properties.loadFromXML``)."""

from __future__ import annotations

from journal.content.filevault import xml_io
from runtime.errors import DecodeError

PROPERTIES_PATH = "META-INF/vault/properties.xml"
_DOCTYPE = '<!DOCTYPE properties SYSTEM "http://java.sun.com/dtd/properties.dtd">'


def parse_properties(data: bytes) -> dict[str, str]:
    root = xml_io.parse(data, PROPERTIES_PATH, max_elements=100_000, max_attributes=4)
    if root.name[1] != "properties":
        raise DecodeError(f"{PROPERTIES_PATH}: root element is not properties")
    found: dict[str, str] = {}
    for entry in root.children:
        if entry.name[1] != "entry":
            continue
        key = next((v for (_, local, _), v in entry.attributes.items() if local == "key"), None)
        if key is None:
            raise DecodeError(f"{PROPERTIES_PATH}: an entry without a key")
        found[key] = "".join(entry.text)
    return found


def write_properties(properties: dict[str, str], comment: str) -> bytes:
    lines = ['<?xml version="1.0" encoding="UTF-8" standalone="no"?>', _DOCTYPE, "<properties>"]
    lines.append(f"<comment>{xml_io.text_content(comment)}</comment>")
    for key in sorted(properties):
        value = xml_io.text_content(properties[key])
        lines.append(f'<entry key="{xml_io.attribute(key)}">{value}</entry>')
    lines.append("</properties>")
    return ("\n".join(lines) + "\n").encode()
