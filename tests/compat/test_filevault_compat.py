"""Jackrabbit FileVault's own code (org.apache.jackrabbit.vault 4.2.0) reads the FileVault
packages scd writes, and scd reads the packages FileVault's serializers write, node for node and
value for value: every value type, multi-values, FileVault's escaping, name encodings, nt:file
nodes, binaries small (in the zip) and by reference. FileVault's side: tests/compat/filevault
(FileVaultCompat.java, built once by tests/compat/build.sh)."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from journal.content.filevault import decode_filevault, encode_filevault
from journal.content.filevault.layout import NAMESPACES, URN_PREFIX
from journal.content.filevault.reading import ACCESS_CONTROL, IMPORT_MODE, NARROWED_TYPE
from journal.content.filevault.values import format_date
from journal.content.filevault.workspace_filter import FilterSet, Rule
from journal.content.package import ContentPackage, Value
from journal.wire.journal_pb2 import ReqType
from tests.compat.jvm import build_classpath, needs_jvm

HERE = Path(__file__).parent

pytestmark = needs_jvm("FileVault's")

_Json = dict[str, Any]


@pytest.fixture(scope="module")
def classpath() -> str:
    return build_classpath(["bash", str(HERE / "build.sh"), str(HERE / "filevault")])


def run_filevault(classpath: str, mode: str, zip_path: Path, spec: _Json | None = None) -> Any:
    done = subprocess.run(
        ["java", "-cp", classpath, "io.scd.compat.FileVaultCompat", mode, str(zip_path)],
        input=json.dumps(spec) if spec is not None else "",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if mode == "read" else None


# ------------------------------------------------------------------------- packages
_AWKWARD = [
    "plain",
    "a,b,c",
    "{braces}",
    "[bracket",
    "back\\slash",
    "",
    "tab\tnew\nline\rcr",
    "ctl\x01\x1f",
    "é ü € 𝄞",
    "<&>\"'",
    "\\0",
    "{Long}1",
]


def _multi(*values: Value) -> Value:
    out = Value()
    out.multi_value.values.extend(values)
    return out


def _values_package() -> ContentPackage:
    package = ContentPackage(
        package_id="values", req_type=ReqType.ADD, created_ms=1_700_000_000_123
    )
    package.metadata["note"] = "a, b"
    package.roots.add(path="/content", deep=True)
    package.nodes.add(path="/content")
    node = package.nodes.add(path="/content/values")
    props = node.properties
    props["jcr:primaryType"].string_value = "nt:unstructured"
    for i, text in enumerate(_AWKWARD):
        props[f"s{i}"].string_value = text
    props["long"].long_value = -(2**63)
    props["long_max"].long_value = 2**63 - 1
    props["double"].double_value = -1.5e-300
    props["double_int"].double_value = 3.0
    props["bool_t"].bool_value = True
    props["bool_f"].bool_value = False
    props["date"].date_ms = 1_600_000_000_456
    props["date_old"].date_ms = -62_000_000_000_000
    props["strings"].CopyFrom(_multi(*(Value(string_value=t) for t in _AWKWARD)))
    props["one_empty"].CopyFrom(_multi(Value(string_value="")))
    props["none"].CopyFrom(_multi())
    props["longs"].CopyFrom(_multi(Value(long_value=1), Value(long_value=-2)))
    props["doubles"].CopyFrom(_multi(Value(double_value=0.1), Value(double_value=1e22)))
    props["bools"].CopyFrom(_multi(Value(bool_value=True), Value(bool_value=False)))
    props["dates"].CopyFrom(_multi(Value(date_ms=0), Value(date_ms=86_400_000)))
    props["sling:resourceType"].string_value = "app/page"
    props["my:prop é"].string_value = "prefixed"
    props["1st-x_x0041_"].string_value = "iso9075"
    for name in ["a_b", "_lead", "jcr:content2", "100%", "é ü", "q?", "x<y>", "sling:ns"]:
        package.nodes.add(path=f"/content/values/{name}").properties["n"].string_value = name
    return package


def _binaries_package() -> ContentPackage:
    package = ContentPackage(package_id="binaries", req_type=ReqType.ADD, created_ms=1)
    package.roots.add(path="/content/dam", deep=True)
    package.roots.add(path="/content/shallow", deep=False)
    package.nodes.add(path="/content/dam")
    package.nodes.add(path="/content/shallow").properties["x"].long_value = 1
    small = package.nodes.add(path="/content/dam/small.txt")
    small.properties["jcr:primaryType"].string_value = "nt:file"
    small.properties["jcr:data"].binary_value.inline = b"hello, \x00 world"
    small.properties["jcr:data"].binary_value.content_type = "text/plain"
    small.properties["jcr:mimeType"].string_value = "text/plain"
    large = package.nodes.add(path="/content/dam/large.png")
    large.properties["jcr:primaryType"].string_value = "nt:file"
    ref = large.properties["jcr:data"].binary_value
    ref.ref.key = "cas/sha256/ab/abcd"
    ref.ref.size = 123_456_789
    ref.ref.sha256 = "ab" * 32
    ref.ref.content_type = "image/png"
    ref.content_type = "image/png"
    large.properties["jcr:mimeType"].string_value = "image/png"
    blobs = package.nodes.add(path="/content/dam/blobs")
    blobs.properties["inline"].binary_value.inline = bytes(range(256))
    blobs.properties["inline"].binary_value.content_type = "application/octet-stream"
    return package


PACKAGES = [_values_package, _binaries_package]


# ------------------------------------------------------------------------- scd -> FileVault
def _typed(value: Value) -> tuple[str, list[Any]]:
    """The JCR type and typed values FileVault should see for an scd value."""
    kind = value.WhichOneof("kind")
    if kind == "multi_value":
        items = [_typed(v) for v in value.multi_value.values]
        return (items[0][0] if items else "String"), [v for _, vs in items for v in vs]
    if kind == "long_value":
        return "Long", [value.long_value]
    if kind == "double_value":
        return "Double", [value.double_value]
    if kind == "bool_value":
        return "Boolean", [value.bool_value]
    if kind == "date_ms":
        return "Date", [value.date_ms]
    if kind == "binary_value" and value.binary_value.HasField("ref"):
        ref = value.binary_value.ref
        return "Binary", [f"scd:{ref.key}#{ref.size}#{ref.sha256}"]
    if kind == "binary_value":
        return "Binary", [0]  # {Binary} with its data in a .binary entry
    return "String", [value.string_value]


def _seen_by_filevault(read: _Json) -> dict[str, dict[str, tuple[str, bool, list[Any]]]]:
    seen: dict[str, dict[str, tuple[str, bool, list[Any]]]] = {}
    for node in read["nodes"]:
        props = seen.setdefault(node["path"], {})
        for name, prop in node["properties"].items():
            # An untyped docview value is "undefined" to FileVault: the node type decides on
            # import, a String for any residual property definition (nt:unstructured).
            ptype = "String" if prop["type"] == "undefined" else prop["type"]
            props[name] = (ptype, prop["multi"], prop["typed"])
            assert prop["reference"] == any(v.startswith("scd:") for v in prop["values"][:1])
    return seen


@pytest.mark.parametrize("make", PACKAGES, ids=lambda f: f.__name__)
def test_filevault_reads_what_scd_writes(classpath: str, tmp_path: Path, make: Any) -> None:
    package = make()
    zip_path = tmp_path / "scd.zip"
    zip_path.write_bytes(encode_filevault(package))
    read = run_filevault(classpath, "read", zip_path)
    seen = _seen_by_filevault(read)
    files = {path: base64.b64decode(data) for path, data in read["files"].items()}
    for node in package.nodes:
        props = dict(node.properties)
        is_file = props.get("jcr:primaryType") == Value(string_value="nt:file")
        where = f"{node.path}/jcr:content" if is_file else node.path
        got = seen[node.path] if not is_file else {**seen[where], **seen[node.path]}
        for name, value in props.items():
            inline = value.WhichOneof("kind") == "binary_value" and value.binary_value.HasField(
                "inline"
            )
            if is_file and name == "jcr:data" and inline:
                # FileVault's layout of a small file: the zip entry is its data, the docview of
                # <name>.dir holds the rest of the node and its jcr:content.
                assert name not in got
                assert files[node.path] == value.binary_value.inline
                continue
            ptype, typed = _typed(value)
            ptype = "Name" if name in ("jcr:primaryType", "jcr:mixinTypes") else ptype
            multi = value.WhichOneof("kind") == "multi_value"
            assert got[name] == (ptype, multi, typed), (node.path, name)
            if inline:
                assert files[f"{node.path}/{name}.binary"] == value.binary_value.inline
        if is_file:
            assert set(got) | {"jcr:data"} == set(props) | {"jcr:data"}
            assert seen[where]["jcr:primaryType"][2] == ["nt:resource"]
        else:
            assert set(got) == set(props), node.path
    assert all(read["contained"].values())
    assert read["properties"]["id"] == f"scd:{package.package_id}:1"
    assert read["properties"]["created"] == package.created_ms
    assert read["properties"]["useBinaryReferences"] == "true"
    filters = {f["root"]: f for f in read["filter"]}
    assert set(filters) == {r.path for r in package.roots}
    for root in package.roots:
        assert filters[root.path]["mode"] == "replace"
        assert len(filters[root.path]["rules"]) == (0 if root.deep else 1)


# ------------------------------------------------------------------------- FileVault -> scd
def _namespaces(read: _Json) -> dict[str, str]:
    prefixes = {
        name.split(":", 1)[0]
        for node in read["nodes"]
        for name in [node["path"].rsplit("/", 1)[1], *node["properties"]]
        if ":" in name
    }
    return {p: NAMESPACES.get(p, URN_PREFIX + p) for p in prefixes | {"jcr", "nt"}}


def _docview_tree(path: str, by_path: dict[str, _Json], document: str) -> _Json:
    node = by_path[path]
    children = [
        p for p in by_path if p.rsplit("/", 1)[0] == path and by_path[p]["document"] == document
    ]
    return {
        "name": "jcr:root" if path == document else path.rsplit("/", 1)[1],
        "properties": [
            {"name": name, **{k: prop[k] for k in ("type", "multi", "values", "reference")}}
            for name, prop in node["properties"].items()
        ],
        "children": [_docview_tree(c, by_path, document) for c in children],
    }


def _rewritten(read: _Json, package: ContentPackage) -> _Json:
    """What FileVault read, as a spec for FileVault's serializers to write again."""
    by_path = {n["path"]: n for n in read["nodes"]}
    files = [
        {"path": key.removesuffix(".binary"), "suffix": ".binary", "base64": data}
        if key.endswith(".binary")
        else {"path": key, "base64": data}
        for key, data in read["files"].items()
    ]
    return {
        "namespaces": _namespaces(read),
        "filter": read["filter"],
        "properties": {
            "name": package.package_id,
            "group": "scd",
            "version": "1",
            "useBinaryReferences": "true",
            "created": format_date(package.created_ms),
            **{f"scd.metadata.{k}": v for k, v in package.metadata.items()},
        },
        "docviews": [
            {"path": doc, "dir": doc in read["files"], "root": _docview_tree(doc, by_path, doc)}
            for doc in sorted({n["document"] for n in read["nodes"]})
        ],
        "files": files,
    }


def _content(package: ContentPackage) -> _Json:
    return {
        "id": package.package_id,
        "created": package.created_ms,
        "metadata": dict(package.metadata),
        "roots": sorted((r.path, r.deep) for r in package.roots),
        "nodes": {n.path: dict(n.properties) for n in package.nodes},
    }


@pytest.mark.parametrize("make", PACKAGES, ids=lambda f: f.__name__)
def test_scd_reads_what_filevault_writes(classpath: str, tmp_path: Path, make: Any) -> None:
    """FileVault reads scd's package and writes what it read with its own serializers (docview,
    filter.xml, properties.xml): scd reads that package as the one it started from."""
    package = make()
    (tmp_path / "scd.zip").write_bytes(encode_filevault(package))
    read = run_filevault(classpath, "read", tmp_path / "scd.zip")
    run_filevault(classpath, "write", tmp_path / "filevault.zip", _rewritten(read, package))
    decoded = decode_filevault(
        (tmp_path / "filevault.zip").read_bytes(), package_id="", req_type=ReqType.ADD
    )
    assert not decoded.unmodelled.counts
    assert _content(decoded.package) == _content(package)


def _prop(name: str, ptype: str, *values: str, multi: bool = False) -> _Json:
    return {"name": name, "type": ptype, "multi": multi, "values": list(values)}


def test_what_scd_does_not_model_is_reported(classpath: str, tmp_path: Path) -> None:
    """A FileVault-written tree in one docview: JCR types scd narrows to strings, mixins, an
    access control list, a merge filter with rules; the content is read, the rest reported."""
    policy = {
        "name": "rep:policy",
        "properties": [_prop("jcr:primaryType", "Name", "rep:ACL")],
        "children": [
            {
                "name": "allow",
                "properties": [
                    _prop("jcr:primaryType", "Name", "rep:GrantACE"),
                    _prop("rep:principalName", "String", "everyone"),
                    _prop("rep:privileges", "Name", "jcr:read", multi=True),
                ],
            }
        ],
    }
    page = {
        "name": "page",
        "properties": [
            _prop("jcr:primaryType", "Name", "nt:unstructured"),
            _prop("jcr:mixinTypes", "Name", "mix:referenceable", "mix:title", multi=True),
            _prop("target", "Path", "/content/other"),
            _prop("price", "Decimal", "12345678901234567890.123456789"),
            _prop("title", "String", "a, {b} [c] \\ d"),
            _prop("tags", "String", "x,y", "[z]", "", multi=True),
        ],
        "children": [policy],
    }
    spec: _Json = {
        "namespaces": {p: NAMESPACES[p] for p in ("jcr", "nt", "mix", "rep", "sling")},
        "filter": [
            {"root": "/content/site", "mode": "replace", "rules": []},
            {
                "root": "/etc/x",
                "mode": "merge",
                "rules": [
                    {"include": True, "pattern": "/etc/x/a(/.*)?"},
                    {"include": False, "pattern": "/etc/x/a/\\Qb\\E"},
                ],
            },
        ],
        "properties": {"name": "fv", "group": "g", "version": "2"},
        "docviews": [
            {
                "path": "/content/site",
                "root": {
                    "name": "jcr:root",
                    "properties": [_prop("jcr:primaryType", "Name", "sling:Folder")],
                    "children": [page],
                },
            }
        ],
        "files": [],
    }
    run_filevault(classpath, "write", tmp_path / "fv.zip", spec)
    decoded = decode_filevault(
        (tmp_path / "fv.zip").read_bytes(), package_id="", req_type=ReqType.ADD
    )
    nodes = {n.path: n.properties for n in decoded.package.nodes}
    assert set(nodes) == {"/content/site", "/content/site/page"}
    page_props = nodes["/content/site/page"]
    assert page_props["target"].string_value == "/content/other"
    assert page_props["price"].string_value == "12345678901234567890.123456789"
    assert page_props["title"].string_value == "a, {b} [c] \\ d"
    assert [v.string_value for v in page_props["tags"].multi_value.values] == ["x,y", "[z]", ""]
    assert [v.string_value for v in page_props["jcr:mixinTypes"].multi_value.values] == [
        "mix:referenceable",
        "mix:title",
    ]
    report = decoded.unmodelled
    assert report.counts[ACCESS_CONTROL] == 1
    assert report.examples[ACCESS_CONTROL] == ["/content/site/page/rep:policy"]
    assert report.counts[NARROWED_TYPE] == 2
    assert report.counts[IMPORT_MODE] == 1  # merge, imported as update
    assert decoded.filter_sets == (
        FilterSet("/content/site"),
        FilterSet(
            "/etc/x", "merge", (Rule(True, "/etc/x/a(/.*)?"), Rule(False, "/etc/x/a/\\Qb\\E"))
        ),
    )
    assert decoded.package.package_id == "fv"
