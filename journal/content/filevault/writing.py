"""scd's content package -> a FileVault package (zip bytes).

Every node is a directory with its ``.content.xml`` (``<jcr:root .../>``); a file node (nt:file
with jcr:data) becomes JCR's nt:file with a ``jcr:content`` (nt:resource) holding jcr:data,
jcr:mimeType, jcr:encoding, jcr:lastModified(By). An inline file is the zip entry itself, its
node's docview in ``<name>.dir/.content.xml``; another inline binary is ``<property>.binary`` in
its node's directory; a binary in the blob store is a ``{BinaryRef}scd:<key>#<size>#<sha256>``.
A deep root is a filter root, a shallow one a root with the one include Sling writes for it.
"""

from __future__ import annotations

from collections.abc import Iterable

from journal.content import rules
from journal.content.filevault import names, xml_io
from journal.content.filevault.archive import write_entries
from journal.content.filevault.docview_values import BINARY_REF, DocViewProperty, format_property
from journal.content.filevault.layout import (
    BINARY_SUFFIX,
    CONTENT,
    CONTENT_XML,
    DIR_SUFFIX,
    FOREIGN_REF_KEY,
    JCR_ROOT,
    NAMESPACES,
    RESOURCE_PROPERTIES,
    RESOURCE_TYPE,
    SCD_REF_PREFIX,
    URN_PREFIX,
    join,
    name_of,
    parent_of,
)
from journal.content.filevault.package_properties import PROPERTIES_PATH, write_properties
from journal.content.filevault.values import format_date, from_value
from journal.content.filevault.workspace_filter import (
    FILTER_PATH,
    FilterSet,
    Rule,
    quote,
    write_filter,
)
from journal.content.package import (
    FILE_DATA,
    FILE_TYPE,
    NODE_TYPE,
    BlobRef,
    ContentPackage,
    Node,
    Value,
)

METADATA_PREFIX = "scd.metadata."
_Props = dict[str, Value]


def _refused(
    detail: str, path: str | None = None, prop: str | None = None
) -> rules.ContentRuleError:
    return rules.ContentRuleError(
        rules.NAME_SYNTAX, f"{detail} (in a FileVault package)", path=path, prop=prop
    )


def _check(node: Node) -> None:
    try:
        for segment in node.path[1:].split("/") if node.path != "/" else ():
            names.check_jcr_name(segment, "node name")
        for prop in node.properties:
            names.check_jcr_name(prop, "property name")
    except ValueError as exc:
        raise _refused(str(exc), node.path) from None


def _is_file(props: _Props) -> bool:
    kind = props.get(NODE_TYPE)
    data = props.get(FILE_DATA)
    return (
        kind is not None
        and kind.WhichOneof("kind") == "string_value"
        and kind.string_value == FILE_TYPE
        and data is not None
        and data.WhichOneof("kind") == "binary_value"
    )


def _reference(ref: BlobRef) -> str:
    if ref.key.startswith(FOREIGN_REF_KEY):
        return ref.key[len(FOREIGN_REF_KEY) :]
    return f"{SCD_REF_PREFIX}{ref.key}#{ref.size}#{ref.sha256}"


class _Writer:
    def __init__(self, package: ContentPackage) -> None:
        self.nodes: dict[str, _Props] = {}
        self.nested: dict[str, str] = {}  # jcr:content path -> its file node's path
        self.inline_files: set[str] = set()
        self.entries: dict[str, bytes] = {}
        for node in package.nodes:
            _check(node)
            props = dict(node.properties)
            if _is_file(props):
                content = join(node.path, CONTENT)
                if any(n.path == content for n in package.nodes):
                    raise _refused(
                        "a file node with jcr:data has a jcr:content node too", node.path
                    )
                resource = {k: props.pop(k) for k in sorted(RESOURCE_PROPERTIES) if k in props}
                resource[NODE_TYPE] = Value(string_value=RESOURCE_TYPE)
                self.nodes[content] = resource
                self.nested[content] = node.path
                if resource[FILE_DATA].binary_value.WhichOneof("data") == "inline":
                    self.inline_files.add(node.path)
            self.nodes[node.path] = props

    def platform_dir(self, path: str) -> str:
        parts = [JCR_ROOT]
        current = ""
        for segment in path[1:].split("/") if path != "/" else ():
            current += "/" + segment
            suffix = DIR_SUFFIX if current in self.inline_files else ""
            parts.append(names.platform_name(segment) + suffix)
        return "/".join(parts)

    def add(self, name: str, data: bytes) -> None:
        if name in self.entries:
            raise _refused(f"two items would be the zip entry {name!r}")
        self.entries[name] = data

    def attributes(self, path: str, props: _Props, used: set[str]) -> list[str]:
        out = []
        for prop in sorted(props):
            value = props[prop]
            if value.WhichOneof("kind") == "binary_value":
                binary = value.binary_value
                if binary.WhichOneof("data") == "ref":
                    docview = DocViewProperty(BINARY_REF, (_reference(binary.ref),))
                else:
                    if prop == FILE_DATA and self.nested.get(path) in self.inline_files:
                        file_node = self.nested[path]
                        parent = self.platform_dir(parent_of(file_node))
                        self.add(
                            f"{parent}/{names.platform_name(name_of(file_node))}", binary.inline
                        )
                        continue
                    base = f"{self.platform_dir(path)}/{names.platform_name(prop)}{BINARY_SUFFIX}"
                    self.add(base, binary.inline)
                    docview = DocViewProperty("Binary", ("",))
            else:
                try:
                    docview = from_value(value)
                except ValueError as exc:
                    raise _refused(str(exc), path, prop) from None
            out.append(
                f'{_xml_name(prop, used)}="{xml_io.attribute(format_property(prop, docview))}"'
            )
        return out

    def docview(self, path: str) -> bytes:
        # FileVault resolves the node's own name (its file name) with the document's namespace
        # declarations: a prefix used only there is declared too.
        used = {"jcr"}
        if path != "/":
            _xml_name(name_of(path), used)
        root = self.attributes(path, self.nodes[path], used)
        nested = ""
        content = join(path, CONTENT)
        if content in self.nested:
            inner = self.attributes(content, self.nodes[content], used)
            nested = f"\n    <jcr:content\n        {(chr(10) + '        ').join(inner)}/>\n"
        declarations = [
            f'xmlns:{p}="{xml_io.attribute(NAMESPACES.get(p, URN_PREFIX + p))}"'
            for p in sorted(used)
            if p != "xml"
        ]
        head = "\n    ".join(["<jcr:root", *declarations, *root])
        tail = f">{nested}</jcr:root>\n" if nested else "/>\n"
        return f'<?xml version="1.0" encoding="UTF-8"?>\n{head}{tail}'.encode()

    def write(self) -> None:
        for path in self.nodes:
            if path in self.nested:
                continue
            self.add(f"{self.platform_dir(path)}/{CONTENT_XML}".lstrip("/"), self.docview(path))


def _xml_name(name: str, used: set[str]) -> str:
    prefix, _, local = name.rpartition(":")
    if prefix:
        used.add(prefix)
        return f"{prefix}:{names.xml_local_name(local)}"
    return names.xml_local_name(local)


def _filter_sets(package: ContentPackage) -> list[FilterSet]:
    return [
        FilterSet(r.path) if r.deep else FilterSet(r.path, rules=(Rule(True, quote(r.path)),))
        for r in package.roots
    ]


def _checked_text(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    out = {}
    for key, value in items:
        if any(ord(ch) < 0x20 and ch not in "\t\n\r" for ch in key + value):
            raise _refused(f"metadata {key!r} holds characters XML cannot carry")
        out[key] = value
    return out


def encode_filevault(package: ContentPackage) -> bytes:
    """The FileVault package of ``package``; raises ContentRuleError for content FileVault
    cannot represent (a name JCR refuses, a name its layout reserves)."""
    writer = _Writer(package)
    writer.write()
    properties = _checked_text(
        [
            ("name", package.package_id),
            ("group", "scd"),
            ("version", "1"),
            ("useBinaryReferences", "true"),
            ("created", format_date(package.created_ms)),
            *((METADATA_PREFIX + k, v) for k, v in sorted(package.metadata.items())),
        ]
    )
    writer.add(PROPERTIES_PATH, write_properties(properties, "FileVault Package Properties"))
    writer.add(FILTER_PATH, write_filter(_filter_sets(package)))
    directories = {
        entry.rsplit("/", i)[0] for entry in writer.entries for i in range(1, entry.count("/") + 1)
    }
    clash = directories & set(writer.entries)
    if clash:
        raise _refused(f"zip entry {min(clash)!r} would be both a file and a directory")
    return write_entries(writer.entries)
