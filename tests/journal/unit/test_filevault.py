"""FileVault packages (journal/content/filevault): random trees survive scd -> FileVault ->
scd exactly, FileVault's value grammar and name encodings read as FileVault reads them, what
scd does not model is reported, and hostile zips and XML are refused within bounds."""

from __future__ import annotations

import io
import zipfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journal.content.filevault import decode_filevault, encode_filevault
from journal.content.filevault.docview_values import (
    DocViewProperty,
    format_property,
    parse_property,
)
from journal.content.filevault.names import check_jcr_name, platform_name, repository_name
from journal.content.package import ContentPackage, Value
from journal.wire.journal_pb2 import ReqType
from runtime.errors import DecodeError

_CHARS = st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/:[]|*")
_LOCAL = st.text(_CHARS, min_size=1, max_size=12).filter(
    lambda s: (
        s == s.strip()
        and s not in (".", "..")
        and not s.endswith((".dir", ".binary"))
        and s != ".content.xml"
    )
)
_ANY_NAME = st.one_of(
    _LOCAL, st.builds(lambda p, n: f"{p}:{n}", st.sampled_from(["jcr", "sling", "my"]), _LOCAL)
)


def _representable(name: str) -> bool:
    try:
        check_jcr_name(name, "name")
    except ValueError:
        return False
    return True


# The names scd writes into a FileVault package (those it refuses are tested apart).
_NAME = _ANY_NAME.filter(_representable)
_TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=20)
_SCALARS = st.one_of(
    _TEXT.map(lambda t: Value(string_value=t)),
    st.integers(-(2**63), 2**63 - 1).map(lambda n: Value(long_value=n)),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda f: Value(double_value=f)),
    st.booleans().map(lambda b: Value(bool_value=b)),
    st.integers(-62_135_596_800_000, 253_402_300_799_999).map(lambda ms: Value(date_ms=ms)),
)


def _multi(kind: st.SearchStrategy[Value]) -> st.SearchStrategy[Value]:
    def build(items: list[Value]) -> Value:
        value = Value()
        value.multi_value.values.extend(items)
        return value

    return st.lists(kind, min_size=1, max_size=4).map(build)


_VALUES = st.one_of(
    _SCALARS,
    _multi(_TEXT.map(lambda t: Value(string_value=t))),
    _multi(st.integers(-5, 5).map(lambda n: Value(long_value=n))),
    st.binary(max_size=40).map(
        lambda b: Value(binary_value={"inline": b, "content_type": "application/octet-stream"})
    ),
)


@st.composite
def packages(draw: st.DrawFn) -> ContentPackage:
    package = ContentPackage(
        package_id="p", req_type=ReqType.ADD, created_ms=draw(st.integers(0, 2**41))
    )
    package.metadata.update(
        draw(st.dictionaries(_LOCAL, st.text("abc ,é", max_size=5), max_size=2))
    )
    package.roots.add(path="/content", deep=True)
    # JCR has no node without its parent: FileVault would make a missing one an nt:folder.
    paths = {"/content"}
    for names in draw(st.lists(st.lists(_NAME, min_size=1, max_size=3), max_size=6)):
        paths.update("/content/" + "/".join(names[: i + 1]) for i in range(len(names)))
    for path in sorted(paths):
        node = package.nodes.add(path=path)
        for name, value in draw(st.dictionaries(_NAME, _VALUES, max_size=4)).items():
            node.properties[name].CopyFrom(value)
    return package


@settings(max_examples=150, deadline=None)
@given(packages())
def test_random_trees_survive_filevault_exactly(package: ContentPackage) -> None:
    back = decode_filevault(encode_filevault(package), package_id="p", req_type=ReqType.ADD)
    assert back.package == package
    assert not back.unmodelled.counts


@settings(max_examples=300, deadline=None)
@given(_ANY_NAME)
def test_a_name_reads_back_from_its_file_name_or_is_refused(name: str) -> None:
    back = repository_name(platform_name(name))
    if back == name:
        assert check_jcr_name(name, "name") == name
    else:
        with pytest.raises(ValueError, match="would read back from FileVault's file names"):
            check_jcr_name(name, "name")


def test_a_name_filevault_misreads_is_refused() -> None:
    """FileVault reads the character after a leading "_" unescaped."""
    for name in ("_<", "_%x", "_?", "_>y"):
        assert repository_name(platform_name(name)) != name
        with pytest.raises(ValueError, match="would read back"):
            check_jcr_name(name, "node name")
    assert check_jcr_name("_a<", "node name") == "_a<"


@settings(max_examples=300, deadline=None)
@given(st.lists(_TEXT, max_size=4), st.booleans())
def test_docview_values_read_back(values: list[str], multi: bool) -> None:
    prop = DocViewProperty(None, tuple(values) if multi else (values[0] if values else "",), multi)
    assert parse_property(format_property("p", prop)) == prop


@pytest.mark.parametrize(
    ("platform", "name"),
    [
        ("_cq_content", "cq:content"),
        ("__test_image.jpg", "_test_image.jpg"),
        ("_cq_test%3aimage.jpg", "cq:test:image.jpg"),
        ("cq_%3atest.jpg", "cq_:test.jpg"),
    ],
)
def test_filevault_name_table(platform: str, name: str) -> None:
    assert repository_name(platform) == name
    assert platform_name(name) == platform


def _zip(entries: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, body in entries.items():
            archive.writestr(name, body)
    return out.getvalue()


FILTER = b'<workspaceFilter version="1.0"><filter root="/c"/></workspaceFilter>'
JCR = b'xmlns:jcr="http://www.jcp.org/jcr/1.0"'


def _decode(entries: dict[str, bytes]) -> object:
    return decode_filevault(
        _zip({"META-INF/vault/filter.xml": FILTER, **entries}), package_id="x", req_type=ReqType.ADD
    )


def test_unmodelled_content_is_reported_not_imported() -> None:
    policy = b"<jcr:root " + JCR + b' jcr:primaryType="rep:ACL"/>'
    node = b"<jcr:root " + JCR + b' jcr:primaryType="nt:unstructured" ref="{Path}/a" n="{Name}x"/>'
    back = decode_filevault(
        _zip(
            {
                "META-INF/vault/filter.xml": FILTER,
                "META-INF/vault/nodetypes.cnd": b"[x]",
                "META-INF/vault/hooks/h.jar": b"",
                "jcr_root/c/.content.xml": node,
                "jcr_root/c/_rep_policy/.content.xml": policy,
            }
        ),
        package_id="x",
        req_type=ReqType.ADD,
    )
    assert [n.path for n in back.package.nodes] == ["/c"]
    assert back.package.nodes[0].properties["ref"].string_value == "/a"
    assert back.unmodelled.counts == {
        "access-control": 1,
        "node-type-definitions": 1,
        "install-hook": 1,
        "narrowed-type": 2,
    }


def test_filevault_layout_of_a_plain_file_and_folder() -> None:
    back = decode_filevault(
        _zip({"META-INF/vault/filter.xml": FILTER, "jcr_root/c/d/a.txt": b"hi"}),
        package_id="x",
        req_type=ReqType.ADD,
    )
    nodes = {n.path: n for n in back.package.nodes}
    assert nodes["/c"].properties["jcr:primaryType"].string_value == "nt:folder"
    assert nodes["/c/d/a.txt"].properties["jcr:data"].binary_value.inline == b"hi"
    assert nodes["/c/d/a.txt"].properties["jcr:mimeType"].string_value == "text/plain"


def test_modes_and_rules_map_onto_scopes() -> None:
    filt = (
        b'<workspaceFilter version="1.0"><filter root="/c" mode="merge"/>'
        b'<filter root="/s"><include pattern="/\\Qs\\E"/></filter></workspaceFilter>'
    )
    node = b"<jcr:root " + JCR + b' jcr:primaryType="nt:unstructured"/>'
    back = decode_filevault(
        _zip(
            {
                "META-INF/vault/filter.xml": filt,
                "jcr_root/c/.content.xml": node,
                "jcr_root/s/.content.xml": node,
                "jcr_root/s/t/.content.xml": node,
            }
        ),
        package_id="x",
        req_type=ReqType.ADD,
    )
    assert [(r.path, r.deep) for r in back.package.roots] == [("/c", False), ("/s", False)]
    assert [n.path for n in back.package.nodes] == ["/c", "/s"]
    assert back.unmodelled.counts == {"import-mode": 1}


@pytest.mark.parametrize(
    ("entries", "reason"),
    [
        ({"../evil": b"x"}, "unsafe"),
        ({"/abs": b"x"}, "unsafe"),
        ({"jcr_root/c/.content.xml": b'<!DOCTYPE x [<!ENTITY a "aaaa">]><x/>'}, "internal subset"),
        (
            {"jcr_root/c/.content.xml": b'<!DOCTYPE x SYSTEM "http://evil/x.dtd"><x>&e;</x>'},
            "entity",
        ),
        ({"jcr_root/c/.content.xml": b"<a>" * 700 + b"</a>" * 700}, "deeper"),
        ({"jcr_root/c/.content.xml": b"<jcr:root " + JCR + b' p="{Long}x"/>'}, "not a Long"),
        ({"jcr_root/c/.content.xml": b"<jcr:root " + JCR + b' p="{Nope}x"/>'}, "unknown type"),
        ({"jcr_root/c/.content.xml": b"<jcr:root"}, "well-formed"),
    ],
)
def test_hostile_packages_are_refused(entries: dict[str, bytes], reason: str) -> None:
    with pytest.raises(DecodeError, match=reason):
        _decode(entries)


def test_zip_bomb_stops_at_the_limit() -> None:
    from journal.content.rules import ContentLimits

    bomb = _zip({"META-INF/vault/filter.xml": FILTER, "jcr_root/c/big": b"\0" * (8 << 20)})
    assert len(bomb) < 64 << 10
    with pytest.raises(DecodeError, match="inflates beyond"):
        decode_filevault(
            bomb,
            package_id="x",
            req_type=ReqType.ADD,
            limits=ContentLimits(max_package_bytes=1 << 20),
        )


def test_not_a_filevault_package() -> None:
    with pytest.raises(DecodeError, match="not a readable zip"):
        decode_filevault(b"SCDP\x01\x01", package_id="x", req_type=ReqType.ADD)
    with pytest.raises(DecodeError, match=r"no META-INF/vault/filter\.xml"):
        decode_filevault(_zip({"a": b""}), package_id="x", req_type=ReqType.ADD)


def _file(package: ContentPackage, path: str, data: Value) -> None:
    node = package.nodes.add(path=path)
    node.properties["jcr:primaryType"].string_value = "nt:file"
    node.properties["jcr:mimeType"].string_value = data.binary_value.content_type
    node.properties["jcr:lastModified"].date_ms = 1_000
    node.properties["jcr:data"].CopyFrom(data)


def test_file_nodes_inline_and_by_reference_survive() -> None:
    package = ContentPackage(package_id="p", req_type=ReqType.ADD)
    package.roots.add(path="/s", deep=True)
    package.nodes.add(path="/s")
    _file(
        package, "/s/a.html", Value(binary_value={"inline": b"<p/>", "content_type": "text/html"})
    )
    ref = {"key": "cas/sha256/ab/ab", "size": 9, "sha256": "a" * 64, "content_type": "image/png"}
    _file(package, "/s/b.png", Value(binary_value={"ref": ref, "content_type": "image/png"}))
    data = encode_filevault(package)
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert "jcr_root/s/a.html" in names
    assert "jcr_root/s/a.html.dir/.content.xml" in names
    assert b"{BinaryRef}scd:cas/sha256/ab/ab#9#" in zipfile.ZipFile(io.BytesIO(data)).read(
        "jcr_root/s/b.png/.content.xml"
    )
    assert decode_filevault(data, package_id="p", req_type=ReqType.ADD).package == package
