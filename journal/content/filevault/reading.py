"""A FileVault package (zip bytes) -> scd's content package, and what scd does not model.

What FileVault can hold and scd cannot (access control, node type definitions, sub-packages,
install hooks, same-name siblings, multi-valued binaries, property types without an scd type,
import modes and filter rules scd's scopes cannot express) is left out of the content package
and listed in :class:`Unmodelled`: per kind, a count and the first paths.
"""

from __future__ import annotations

import mimetypes
from collections import Counter
from dataclasses import dataclass, field

from journal.content import rules
from journal.content.filevault import archive, names, xml_io
from journal.content.filevault.docview_values import BINARY_REF, DocViewProperty, parse_property
from journal.content.filevault.layout import (
    BINARY_SUFFIX,
    CONTENT,
    CONTENT_XML,
    DEFAULT_CONTENT_TYPE,
    DIR_SUFFIX,
    FOREIGN_REF_KEY,
    JCR_NS,
    JCR_ROOT,
    MIME_TYPE,
    PREFIXES,
    RESOURCE_PROPERTIES,
    RESOURCE_TYPE,
    SCD_REF_PREFIX,
    XML_NS,
    join,
    parent_of,
)
from journal.content.filevault.package_properties import PROPERTIES_PATH, parse_properties
from journal.content.filevault.values import NARROWED_TYPES, parse_date, to_value
from journal.content.filevault.workspace_filter import FILTER_PATH, FilterSet, parse_filter
from journal.content.filevault.writing import METADATA_PREFIX
from journal.content.package import (
    FILE_DATA,
    FILE_TYPE,
    FOLDER_TYPE,
    NODE_TYPE,
    Binary,
    BlobRef,
    ContentPackage,
    FilterRoot,
    Node,
    Value,
)
from journal.wire.journal_pb2 import ReqType
from runtime.errors import DecodeError

ACCESS_CONTROL = "access-control"
NODE_TYPES = "node-type-definitions"
SUB_PACKAGE = "sub-package"
INSTALL_HOOK = "install-hook"
PRIVILEGES = "privileges"
SAME_NAME_SIBLING = "same-name-sibling"
BINARY = "binary"
NARROWED_TYPE = "narrowed-type"
IMPORT_MODE = "import-mode"
FILTER_RULES = "filter-rules"
MAX_LISTED = 20  # paths listed per kind; the count is exact
_POLICY_NAMES = frozenset({"rep:policy", "rep:repoPolicy", "rep:cugPolicy", "rep:principalPolicy"})
_ACCESS_TYPES = frozenset(
    {
        "rep:ACL",
        "rep:GrantACE",
        "rep:DenyACE",
        "rep:CugPolicy",
        "rep:User",
        "rep:SystemUser",
        "rep:Group",
        "rep:AuthorizableFolder",
        "rep:Restrictions",
    }
)
_DOCVIEW_MARKS = (b"<jcr:root", b'"' + JCR_NS.encode() + b'"')


@dataclass
class Unmodelled:
    """What a package holds that scd does not import: per kind, how often and where."""

    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, kind: str, where: str) -> None:
        self.counts[kind] += 1
        listed = self.examples.setdefault(kind, [])
        if len(listed) < MAX_LISTED:
            listed.append(where)

    def summary(self) -> str:
        """One line for a status or a log: ``kind: n (first, ...)`` per kind."""
        return "; ".join(
            f"{k}: {n} ({', '.join(self.examples[k][:3])})" for k, n in sorted(self.counts.items())
        )


@dataclass(frozen=True)
class FileVaultPackage:
    package: ContentPackage
    unmodelled: Unmodelled
    filter_sets: tuple[FilterSet, ...]


class _Reader:
    def __init__(self, limits: rules.ContentLimits) -> None:
        self.limits = limits
        self.defined: dict[str, tuple[int, dict[str, DocViewProperty]]] = {}
        self.binaries: dict[str, dict[str, bytes]] = {}
        self.files: dict[str, bytes] = {}
        self.folders: set[str] = set()
        self.skipped: list[str] = []  # subtrees left out
        self.report = Unmodelled()

    def skip(self, kind: str, path: str) -> None:
        self.report.add(kind, path)
        self.skipped.append(path)

    # ------------------------------------------------------------------ the zip's entries
    def scan(self, entries: dict[str, bytes], props: dict[str, str]) -> None:
        for key in props:
            if key.startswith("installhook."):
                self.report.add(INSTALL_HOOK, key)
        for name in sorted(entries):
            if name.startswith(JCR_ROOT + "/"):
                self.entry(name, entries[name])
            elif name.startswith("META-INF/vault/hooks/"):
                self.report.add(INSTALL_HOOK, name)
            elif name.startswith("META-INF/vault/") and name.endswith(".cnd"):
                self.report.add(NODE_TYPES, name)
            elif name == "META-INF/vault/privileges.xml":
                self.report.add(PRIVILEGES, name)
        self.attach_files()

    def entry(self, name: str, body: bytes) -> None:
        parts = name[len(JCR_ROOT) + 1 :].split("/")
        directory = "/"
        for part in parts[:-1]:
            stripped = part[: -len(DIR_SUFFIX)] if part.endswith(DIR_SUFFIX) else part
            directory = join(directory, names.repository_name(stripped))
            if stripped == part:
                self.folders.add(directory)
        base = parts[-1]
        if base == CONTENT_XML:
            self.docview(body, directory, name)
        elif base.endswith(BINARY_SUFFIX):
            prop = names.repository_name(base[: -len(BINARY_SUFFIX)])
            self.binaries.setdefault(directory, {})[prop] = body
        elif base.endswith(".cnd"):
            self.report.add(NODE_TYPES, name)
        elif base.endswith(".xml") and all(m in body[:1024] for m in _DOCVIEW_MARKS):
            self.docview(body, join(directory, names.repository_name(base[:-4])), name)
        else:
            path = join(directory, names.repository_name(base))
            if path.startswith("/etc/packages/") and base.endswith(".zip"):
                self.report.add(SUB_PACKAGE, path)
            else:
                self.files[path] = body

    def docview(self, body: bytes, root: str, what: str) -> None:
        element = xml_io.parse(
            body,
            what,
            max_elements=self.limits.max_nodes + 1,
            max_attributes=self.limits.max_properties,
        )
        depth = root.count("/")
        is_root = element.name[0] == JCR_NS and element.name[1] == "root"
        path = (
            root
            if is_root
            else join(parent_of(root), self.jcr_name(element.name, element.namespaces))
        )
        self.element(element, path, depth, defines=True)

    def jcr_name(self, name: tuple[str, str, str], namespaces: dict[str, str]) -> str:
        uri, local, prefix = name
        local = names.decode_xml_name(local)
        if not uri:
            return local
        if uri == XML_NS:
            return f"xml:{local}"
        known = (
            PREFIXES.get(uri)
            or prefix
            or next((p for p, u in namespaces.items() if u == uri and p), None)
        )
        if not known:
            raise DecodeError(f"namespace {uri!r} has no prefix")
        return f"{known}:{local}"

    def element(
        self, element: xml_io.Element, path: str, depth: int, defines: bool = False
    ) -> None:
        """A docview element: a node when it has properties or is the document's root (a
        nested element without any only orders a child defined elsewhere)."""
        segment = path.rsplit("/", 1)[1]
        if segment.endswith("]") and "[" in segment:
            index = segment[segment.rindex("[") + 1 : -1]
            if index.isdigit() and int(index) > 1:
                self.skip(SAME_NAME_SIBLING, path)
                return
            path = path[: path.rindex("[")]
        if element.attributes or defines:
            props = {
                self.jcr_name(k, element.namespaces): parse_property(v)
                for k, v in element.attributes.items()
            }
            known = self.defined.get(path)
            if known is None or depth >= known[0]:
                self.defined[path] = (depth, props)
        for child in element.children:
            self.element(child, join(path, self.jcr_name(child.name, child.namespaces)), depth)

    # ------------------------------------------------------------------ nodes
    def attach_files(self) -> None:
        for path, body in self.files.items():
            if path not in self.defined:
                mime = mimetypes.guess_type(path)[0] or DEFAULT_CONTENT_TYPE
                self.defined[path] = (0, {NODE_TYPE: DocViewProperty(None, (FILE_TYPE,))})
                resource = {
                    NODE_TYPE: DocViewProperty(None, (RESOURCE_TYPE,)),
                    MIME_TYPE: DocViewProperty(None, (mime,)),
                }
                self.defined.setdefault(join(path, CONTENT), (0, resource))
            content = join(path, CONTENT)
            self.defined.setdefault(
                content, (0, {NODE_TYPE: DocViewProperty(None, (RESOURCE_TYPE,))})
            )
            self.binaries.setdefault(content, {})[FILE_DATA] = body
        for folder in self.folders:
            self.defined.setdefault(folder, (0, {NODE_TYPE: DocViewProperty(None, (FOLDER_TYPE,))}))

    def nodes(self) -> dict[str, dict[str, Value]]:
        out: dict[str, dict[str, Value]] = {}
        for path in sorted(self.defined):
            if any(path == s or path.startswith(s + "/") for s in self.skipped):
                continue
            props = self.defined[path][1]
            kind = props.get(NODE_TYPE)
            primary = kind.values[0] if kind and kind.values else ""
            if path.rsplit("/", 1)[1] in _POLICY_NAMES or primary in _ACCESS_TYPES:
                self.skip(ACCESS_CONTROL, path)
                continue
            if primary == "nt:nodeType":
                self.skip(NODE_TYPES, path)
                continue
            out[path] = self.values(path, props)
        return out

    def values(self, path: str, props: dict[str, DocViewProperty]) -> dict[str, Value]:
        binaries = dict(self.binaries.get(path, {}))
        out: dict[str, Value] = {}
        for prop, docview in props.items():
            value = (
                self.binary(f"{path}/{prop}", docview, binaries.pop(prop, None))
                if docview.type in ("Binary", BINARY_REF)
                else self.scalar(path, prop, docview)
            )
            if value is not None:
                out[prop] = value
        for prop, data in binaries.items():
            out.setdefault(prop, Value(binary_value=Binary(inline=data)))
        mime = out.get(MIME_TYPE)
        for prop, value in out.items():
            if value.WhichOneof("kind") == "binary_value":
                declared = (
                    mime.string_value
                    if prop == FILE_DATA and mime and mime.WhichOneof("kind") == "string_value"
                    else ""
                )
                content_type = declared or DEFAULT_CONTENT_TYPE
                value.binary_value.content_type = content_type
                if value.binary_value.WhichOneof("data") == "ref":
                    value.binary_value.ref.content_type = content_type
        return out

    def binary(self, where: str, docview: DocViewProperty, data: bytes | None) -> Value | None:
        if docview.multi:
            self.report.add(BINARY, f"{where} (multi-valued)")
        elif docview.type == BINARY_REF:
            return Value(binary_value=self.reference(docview.values[0]))
        elif data is None or docview.values != ("",):
            self.report.add(BINARY, f"{where} (no .binary data)")
        else:
            return Value(binary_value=Binary(inline=data))
        return None

    def scalar(self, path: str, prop: str, docview: DocViewProperty) -> Value:
        if docview.type in NARROWED_TYPES:
            self.report.add(NARROWED_TYPE, f"{path}/{prop} ({docview.type})")
        try:
            return to_value(docview)
        except DecodeError as exc:
            raise DecodeError(f"node {path!r} property {prop!r}: {exc}") from None

    @staticmethod
    def reference(text: str) -> Binary:
        if text.startswith(SCD_REF_PREFIX):
            key, _, rest = text[len(SCD_REF_PREFIX) :].partition("#")
            size, _, sha256 = rest.partition("#")
            if size.isdigit():
                return Binary(ref=BlobRef(key=key, size=int(size), sha256=sha256))
        blob_id = text.split(":", 1)[0]
        size = blob_id.rpartition("#")[2]
        return Binary(
            ref=BlobRef(
                key=FOREIGN_REF_KEY + text,
                size=int(size) if size.isdigit() and len(size) < 19 else 0,
            )
        )


def _fold_files(nodes: dict[str, dict[str, Value]]) -> None:
    """JCR's nt:file + jcr:content (nt:resource with jcr:data) -> scd's one file node."""
    for path in [p for p in nodes if p.endswith("/" + CONTENT)]:
        parent = parent_of(path)
        content, node = nodes[path], nodes.get(parent)
        kind = node.get(NODE_TYPE) if node else None
        resource = content.get(NODE_TYPE)
        if (
            node is None
            or kind is None
            or kind.string_value != FILE_TYPE
            or resource is None
            or resource.string_value != RESOURCE_TYPE
            or FILE_DATA not in content
            or content[FILE_DATA].WhichOneof("kind") != "binary_value"
            or not set(content) - {NODE_TYPE} <= RESOURCE_PROPERTIES
            or set(content) - {NODE_TYPE} & set(node)
            or any(p.startswith(path + "/") for p in nodes)
        ):
            continue
        for prop, value in content.items():
            if prop != NODE_TYPE:
                node[prop] = value
        del nodes[path]


def _select(
    sets: list[FilterSet], nodes: dict[str, dict[str, Value]], req_type: int, report: Unmodelled
) -> tuple[list[FilterRoot], dict[str, dict[str, Value]]]:
    roots: dict[str, bool] = {}
    chosen: dict[str, dict[str, Value]] = {}
    for fs in sets:
        exact = fs.mode == "replace" and (not fs.rules or fs.shallow)
        if any(r.match_properties for r in fs.rules):
            report.add(FILTER_RULES, f"{fs.root} (property rules not applied)")
        if req_type != ReqType.ADD:
            if not exact:
                report.add(FILTER_RULES, f"{fs.root} ({fs.mode}, rules: root only)")
            roots[fs.root] = roots.get(fs.root, False) or (exact and not fs.rules)
            continue
        if exact:
            roots[fs.root] = roots.get(fs.root, False) or not fs.rules
            covered = (
                [p for p in nodes if fs.covers(p)]
                if fs.rules
                else [
                    p
                    for p in nodes
                    if p == fs.root or fs.root == "/" or p.startswith(fs.root + "/")
                ]
            )
            chosen.update((p, nodes[p]) for p in covered)
            continue
        if fs.mode in ("merge", "merge_properties", "update_properties"):
            report.add(IMPORT_MODE, f"{fs.root} ({fs.mode} imported as update)")
        if fs.rules and fs.mode == "replace":
            report.add(FILTER_RULES, f"{fs.root} (covered nodes not in the package are kept)")
        for path in nodes:
            if fs.covers(path):
                chosen[path] = nodes[path]
                roots.setdefault(path, False)
    return [FilterRoot(path=p, deep=d) for p, d in roots.items()], chosen


def decode_filevault(
    data: bytes,
    *,
    package_id: str,
    req_type: int,
    limits: rules.ContentLimits = rules.DEFAULT_LIMITS,
) -> FileVaultPackage:
    """Read a FileVault package; raises DecodeError for one that is unsafe or not FileVault."""
    entries = archive.read_entries(data, limits.max_package_bytes)
    if FILTER_PATH not in entries:
        raise DecodeError(f"not a FileVault package: no {FILTER_PATH}")
    sets = parse_filter(entries[FILTER_PATH])
    props = parse_properties(entries[PROPERTIES_PATH]) if PROPERTIES_PATH in entries else {}
    reader = _Reader(limits)
    reader.scan(entries, props)
    nodes = reader.nodes()
    _fold_files(nodes)
    roots, chosen = _select(sets, nodes, req_type, reader.report)
    package = ContentPackage(package_id=package_id or props.get("name", ""), req_type=req_type)  # type: ignore[arg-type]
    package.roots.extend(roots)
    for path in sorted(chosen):
        node = package.nodes.add(path=path)
        for prop, value in chosen[path].items():
            node.properties[prop].CopyFrom(value)
    try:
        package.created_ms = parse_date(props.get("created", ""))
    except DecodeError:
        package.created_ms = 0
    package.metadata.update(
        {k[len(METADATA_PREFIX) :]: v for k, v in props.items() if k.startswith(METADATA_PREFIX)}
    )
    if package.ByteSize() > limits.max_package_bytes:
        raise DecodeError(f"FileVault package decodes beyond {limits.max_package_bytes} bytes")
    return FileVaultPackage(package, reader.report, tuple(sets))


__all__ = ["FileVaultPackage", "Node", "Unmodelled", "decode_filevault"]
