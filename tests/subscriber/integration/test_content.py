"""Content access: listing, reading, verified binary streams and export to a directory.

Most tests run on an in-memory node source and a local blob store (milliseconds); the tests
marked integration build the content through real Spark/Delta commits, one of them with the
blobs on the real S3 server.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from blobstore.api import BlobStore
from blobstore.factory import open_blob_store
from blobstore.local import LocalBlobStore
from blobstore.settings import BlobStoreSettings
from journal.content.package import (
    FILE_DATA,
    FILE_TYPE,
    FOLDER_TYPE,
    LAST_MODIFIED,
    NODE_TYPE,
    Binary,
    BlobRef,
    Node,
)
from publisher.distribute import content_source
from publisher.distribute.content_source import DirectoryContentSource
from subscriber.content import COPY_CHUNK_BYTES, list_tree, open_binary, read_node
from subscriber.errors import (
    BinaryCorrupt,
    BinaryMissing,
    ExportError,
    NodeNotFound,
    PropertyNotFound,
    UnsafeExportPath,
)
from subscriber.export import MIME_PROPERTY, SIDECAR_SUFFIX, export_tree, plan_export, target_path
from subscriber.store.delta import DeltaStore
from subscriber.store.rows import BinaryInfo, StoredNode, node_row
from tests.blobstore.reading import read_blob
from tests.subscriber.packages import add, delete, file_node, new_change_set, node

Props = dict[str, tuple[str, bool, list[str]]]
MODIFIED = "2024-05-01T12:00:00.123+00:00"  # canonical stored form of a date
MODIFIED_NS = 1_714_564_800_123_000_000


# ---------------------------------------------------------------------------- fakes and helpers


class FakeStore:
    """The two reads content access uses, over a dict of nodes."""

    def __init__(self, nodes: list[StoredNode]) -> None:
        self.by_path = {n.path: n for n in nodes}

    def nodes(self, root: str = "/", *, deep: bool = True) -> list[StoredNode]:
        def wanted(path: str) -> bool:
            parent = path.rpartition("/")[0] or "/"
            if not deep:
                return path == root or (parent == root and path != "/")
            return root == "/" or path == root or path.startswith(root + "/")

        return sorted((n for p, n in self.by_path.items() if wanted(p)), key=lambda n: n.path)

    def node(self, path: str) -> StoredNode | None:
        return self.by_path.get(path)


def stored(path: str, props: Props | None = None, **binaries: BinaryInfo) -> StoredNode:
    return StoredNode(path, props or {}, dict(binaries), 7, "p7")


def inline(data: bytes, content_type: str | None = None) -> BinaryInfo:
    return BinaryInfo(None, len(data), None, content_type, data)


def blob(
    blobs: BlobStore, data: bytes, content_type: str = "application/octet-stream"
) -> BinaryInfo:
    ref = blobs.put_content_addressed(io.BytesIO(data), len(data), content_type=content_type)
    return BinaryInfo(ref.key, ref.size, ref.sha256, content_type, None)


def key_of(info: BinaryInfo) -> str:
    assert info.blob_key is not None
    return info.blob_key


def s(value: str) -> tuple[str, bool, list[str]]:
    return ("string", False, [value])


def file_props(mime: str | None = None, modified: str | None = MODIFIED) -> Props:
    props = {NODE_TYPE: s(FILE_TYPE)}
    if mime is not None:
        props[MIME_PROPERTY] = s(mime)
    if modified is not None:
        props[LAST_MODIFIED] = ("date", False, [modified])
    return props


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every regular file under root, by relative path."""
    return {
        str(p.relative_to(root)): sha(p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def blobs(tmp_path: Path) -> Iterator[LocalBlobStore]:
    store = LocalBlobStore(tmp_path / "blobs")
    yield store
    store.close()


# ---------------------------------------------------------------------------- path mapping


def test_node_paths_map_below_the_target(tmp_path: Path) -> None:
    assert target_path(tmp_path, "/") == tmp_path
    assert target_path(tmp_path, "/a/b c/d.txt") == tmp_path / "a" / "b c" / "d.txt"


@pytest.mark.parametrize(
    "path", ["/a/../../etc/passwd", "/..", "a/b", "/a//b", "/a/./b", "/a/\x00b", ""]
)
def test_escaping_paths_are_refused(tmp_path: Path, path: str) -> None:
    with pytest.raises(UnsafeExportPath):
        target_path(tmp_path, path)


def test_a_node_named_like_a_sidecar_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="suffix of property sidecars"):
        target_path(tmp_path, "/a/page" + SIDECAR_SUFFIX)


def test_same_sidecar_suffix_and_mime_property_as_the_publisher_directory_source() -> None:
    assert SIDECAR_SUFFIX == content_source.SIDECAR_SUFFIX
    assert MIME_PROPERTY == content_source.MIME_PROPERTY


def test_plan_keeps_in_the_sidecar_only_what_file_and_directory_cannot_hold(
    tmp_path: Path,
) -> None:
    nodes = [
        stored("/", {NODE_TYPE: s(FOLDER_TYPE), "site": s("x")}),
        stored("/f", {NODE_TYPE: s(FOLDER_TYPE)}),
        stored("/f/plain.txt", file_props("text/plain"), **{FILE_DATA: inline(b"x")}),
        stored(
            "/f/odd.txt",
            {**file_props("image/png", modified="not a date"), "title": s("T")},
            **{FILE_DATA: inline(b"x"), "thumb": inline(b"t")},
        ),
        stored("/page", {NODE_TYPE: s("cq:Page"), "n": ("long", False, ["3"])}),
        stored("/typeless", {FILE_DATA: s("just a string")}),
    ]
    items = {i.node.path: i for i in plan_export(tmp_path, nodes)}
    assert items["/"].sidecar is None  # the directory source reads no sidecar for /
    assert items["/f"].kind == "directory"
    assert items["/f"].sidecar is None
    plain = items["/f/plain.txt"]
    assert plain.kind == "file"
    assert plain.sidecar is None
    assert plain.mtime_ns == MODIFIED_NS
    odd = items["/f/odd.txt"]
    assert odd.kind == "file"
    assert odd.mtime_ns is None
    assert odd.sidecar == tmp_path / "f" / ("odd.txt" + SIDECAR_SUFFIX)
    assert set(odd.sidecar_properties) == {MIME_PROPERTY, LAST_MODIFIED, "title"}
    assert odd.sidecar_binaries == ["thumb"]
    page = items["/page"]
    assert page.kind == "directory"
    assert set(page.sidecar_properties) == {NODE_TYPE, "n"}
    assert items["/typeless"].kind == "directory"


def test_children_of_a_file_node_are_refused(tmp_path: Path) -> None:
    nodes = [
        stored("/a.txt", file_props(), **{FILE_DATA: inline(b"x")}),
        stored("/a.txt/b", {"x": s("y")}),
    ]
    with pytest.raises(ExportError, match=r"ancestor '/a\.txt' is a file"):
        plan_export(tmp_path, nodes)


# ---------------------------------------------------------------------------- list and read


def test_list_tree_and_read_node(blobs: BlobStore) -> None:
    ref = blob(blobs, b"0123456789", "image/png")
    store = FakeStore(
        [
            stored("/a", {NODE_TYPE: s(FOLDER_TYPE)}),
            stored("/a/img.png", file_props("image/png"), **{FILE_DATA: ref}),
            stored(
                "/a/img.png/deeper",
                {
                    "tags": ("string", True, ["x", "y"]),
                    "n": ("long", False, ["-4"]),
                    "d": ("double", False, ["1.5"]),
                    "b": ("bool", False, ["true"]),
                    "when": ("date", False, [MODIFIED]),
                },
                small=inline(b"abc", "text/plain"),
            ),
        ]
    )
    entries = list_tree(store, "/a")
    assert [(e.path, e.node_type, e.binaries, e.binary_bytes) for e in entries] == [
        ("/a", FOLDER_TYPE, 0, 0),
        ("/a/img.png", FILE_TYPE, 1, 10),
        ("/a/img.png/deeper", None, 1, 3),
    ]
    assert [e.path for e in list_tree(store, "/a", deep=False)] == ["/a", "/a/img.png"]
    with pytest.raises(NodeNotFound, match="/nope"):
        list_tree(store, "/nope")

    doc = read_node(store, "/a/img.png/deeper")
    json.dumps(doc)  # plain JSON
    assert doc["properties"] == {
        "b": True,
        "d": 1.5,
        "n": -4,
        "small": {
            "type": "binary",
            "size": 3,
            "sha256": None,
            "contentType": "text/plain",
            "blobKey": None,
            "inline": True,
        },
        "tags": ["x", "y"],
        "when": {"type": "date", "value": MODIFIED},
    }
    assert read_node(store, "/a/img.png")["properties"][FILE_DATA]["blobKey"] == ref.blob_key
    with pytest.raises(NodeNotFound, match="'/a/missing'"):
        read_node(store, "/a/missing")


# ---------------------------------------------------------------------------- binaries


def test_open_binary_streams_inline_and_referenced_bytes(blobs: BlobStore) -> None:
    big = os.urandom(3 * 1024 * 1024 + 17)  # several copy chunks
    store = FakeStore(
        [stored("/f", file_props(), **{FILE_DATA: blob(blobs, big), "small": inline(b"hi")})]
    )
    with open_binary(store, blobs, "/f") as stream:
        assert stream.read() == big
    with open_binary(store, blobs, "/f") as stream:  # in small reads, to the exact end
        parts = []
        while part := stream.read(65536):
            parts.append(part)
    assert b"".join(parts) == big
    with open_binary(store, blobs, "/f", "small") as stream:
        assert stream.read() == b"hi"
    with pytest.raises(PropertyNotFound, match="'thumb'"), open_binary(store, blobs, "/f", "thumb"):
        pass
    with pytest.raises(NodeNotFound), open_binary(store, blobs, "/g"):
        pass


@pytest.mark.parametrize(
    ("stored_bytes", "what"),
    [(b"HELLO world", "sha256"), (b"hello", "size"), (b"hello world, and more", "size")],
)
def test_tampered_blob_is_detected(blobs: BlobStore, stored_bytes: bytes, what: str) -> None:
    ref = blob(blobs, b"hello world")
    blobs.put_bytes(key_of(ref), stored_bytes)  # same key, other bytes
    store = FakeStore([stored("/f", file_props(), **{FILE_DATA: ref})])
    with pytest.raises(BinaryCorrupt) as caught, open_binary(store, blobs, "/f") as stream:
        stream.read()
    err = caught.value
    assert err.what == what
    assert err.blob_key == ref.blob_key
    assert err.path == "/f"
    assert "'/f'" in str(err)
    assert ref.blob_key in str(err)
    assert "expected" in str(err)
    if what == "size":
        assert (err.expected, err.actual) == (11, len(stored_bytes))


def test_reading_only_the_first_bytes_does_not_fail(blobs: BlobStore) -> None:
    data = os.urandom(2 * COPY_CHUNK_BYTES)
    ref = blob(blobs, data)
    blobs.put_bytes(key_of(ref), data[:-1] + bytes([data[-1] ^ 1]))  # the last byte altered
    store = FakeStore([stored("/f", file_props(), **{FILE_DATA: ref})])
    with open_binary(store, blobs, "/f") as stream:
        assert stream.read(3) == data[:3]  # far from the end: nothing to verify yet
        with pytest.raises(BinaryCorrupt, match="sha256"):
            stream.read()


def test_missing_blob_is_a_clear_error(blobs: BlobStore) -> None:
    ref = blob(blobs, b"gone soon")
    blobs.delete(key_of(ref))
    store = FakeStore([stored("/f", file_props(), **{FILE_DATA: ref})])
    with pytest.raises(BinaryMissing) as caught, open_binary(store, blobs, "/f"):
        pass
    assert caught.value.blob_key == ref.blob_key
    assert f"blob {ref.blob_key!r} is missing" in str(caught.value)


# ---------------------------------------------------------------------------- export


def test_export_reproduces_files_byte_for_byte_with_sidecars(
    blobs: BlobStore, tmp_path: Path
) -> None:
    big = os.urandom(2 * 1024 * 1024 + 5)
    store = FakeStore(
        [
            stored("/site", {NODE_TYPE: s(FOLDER_TYPE), "title": s("Site")}),
            stored("/site/big.bin", file_props(), **{FILE_DATA: blob(blobs, big)}),
            stored("/site/a.txt", file_props("text/plain"), **{FILE_DATA: inline(b"text\n")}),
            stored("/site/empty.txt", file_props(modified=None), **{FILE_DATA: inline(b"")}),
            stored(
                "/site/page",
                {NODE_TYPE: s("cq:Page"), "when": ("date", False, [MODIFIED])},
                thumb=inline(b"\x89PNG", "image/png"),
            ),
            stored("/other", {"x": s("outside the root")}),
        ]
    )
    calls: list[tuple[int, int]] = []
    out = tmp_path / "out"
    report = export_tree(store, blobs, "/site", out, progress=lambda d, t: calls.append((d, t)))

    assert (out / "site" / "big.bin").read_bytes() == big
    assert (out / "site" / "a.txt").read_bytes() == b"text\n"
    assert (out / "site" / "empty.txt").read_bytes() == b""
    assert (out / "site" / "page").is_dir()
    assert not (out / "other").exists()
    assert (out / "site" / "a.txt").stat().st_mtime_ns == MODIFIED_NS
    assert json.loads((out / ("site" + SIDECAR_SUFFIX)).read_text()) == {"title": "Site"}
    assert json.loads((out / "site" / ("page" + SIDECAR_SUFFIX)).read_text()) == {
        NODE_TYPE: "cq:Page",
        "thumb": {"type": "binary", "base64": "iVBORw==", "contentType": "image/png"},
        "when": {"type": "date", "value": MODIFIED},
    }
    assert not list(out.rglob("*.part"))
    assert (report.nodes, report.files, report.directories, report.sidecars) == (5, 3, 2, 2)
    assert report.file_bytes == len(big) + 5
    assert calls == [(0, 5), (1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]


def test_exported_tree_reads_back_through_the_publisher_directory_source(
    blobs: BlobStore, tmp_path: Path
) -> None:
    """Export is symmetric: publishing the exported directory gives the same nodes."""
    originals = [
        stored("/c", {NODE_TYPE: s(FOLDER_TYPE), "title": s("C"), "n": ("long", False, ["5"])}),
        stored(
            "/c/doc.pdf",
            {**file_props("application/pdf"), "tags": ("string", True, ["a", "b"])},
            **{FILE_DATA: blob(blobs, b"%PDF-1.7 ...", "application/pdf")},
        ),
        stored("/c/note.md", file_props("text/x-custom"), **{FILE_DATA: inline(b"# hi")}),
        stored(
            "/c/page",
            {
                NODE_TYPE: s("cq:Page"),
                "d": ("double", False, ["0.1"]),
                "ok": ("bool", False, ["false"]),
                "empty": ("string", True, []),
            },
        ),
    ]
    export_tree(FakeStore(originals), blobs, "/c", tmp_path / "out")

    def sink(stream: Any, length: int, mime: str) -> Binary:
        return Binary(inline=stream.read(length), content_type=mime)

    source = DirectoryContentSource(tmp_path / "out")
    again = {n.path: n for n in source.export("/c", True, sink)}
    assert set(again) == {n.path for n in originals}
    for original in originals:
        row = node_row(again[original.path], 0, "p", "a", 0)
        assert row[4] == original.properties, original.path
        data = {k: v[4] for k, v in row[5].items()}
        expected = {
            k: b.data if b.data is not None else read_blob(blobs, str(b.blob_key))
            for k, b in original.binaries.items()
        }
        assert data == expected, original.path


def test_export_refuses_to_follow_a_link_out_of_the_target(
    blobs: BlobStore, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "a").symlink_to(outside)
    store = FakeStore([stored("/a/f.txt", file_props(), **{FILE_DATA: inline(b"x")})])
    with pytest.raises(UnsafeExportPath, match="symbolic link"):
        export_tree(store, blobs, "/a", out)
    assert list(outside.iterdir()) == []


def test_export_of_a_corrupt_blob_leaves_no_file(blobs: BlobStore, tmp_path: Path) -> None:
    ref = blob(blobs, b"original")
    blobs.put_bytes(key_of(ref), b"ORIGINAL")
    store = FakeStore([stored("/f.txt", file_props(), **{FILE_DATA: ref})])
    out = tmp_path / "out"
    with pytest.raises(BinaryCorrupt):
        export_tree(store, blobs, "/f.txt", out)
    assert list(out.iterdir()) == []  # neither the file nor its temporary


def test_export_of_a_missing_root(blobs: BlobStore, tmp_path: Path) -> None:
    with pytest.raises(NodeNotFound):
        export_tree(FakeStore([]), blobs, "/nothing", tmp_path)


# ---------------------------------------------------------------------------- on Spark / Delta


def ref_file(path: str, ref: BlobRef) -> Node:
    n = Node(path=path)
    n.properties[NODE_TYPE].string_value = FILE_TYPE
    n.properties[FILE_DATA].binary_value.CopyFrom(Binary(ref=ref))
    return n


def put_ref(blobs: BlobStore, data: bytes) -> BlobRef:
    ref = blobs.put_content_addressed(io.BytesIO(data), len(data))
    return BlobRef(key=ref.key, size=ref.size, sha256=ref.sha256, content_type=ref.content_type)


def build_store(spark: Any, location: str, blobs: BlobStore) -> tuple[DeltaStore, dict[str, bytes]]:
    """Commit a small tree (inline and referenced files, a replaced and a deleted subtree)."""
    files = {
        "/content/site/small.txt": b"small inline file\n",
        "/content/site/img/big.bin": os.urandom(1024 * 1024 + 3),
        "/content/site/img/empty.bin": b"",
        "/content/site/doc.txt": os.urandom(70_000),
    }
    store = DeltaStore(spark, location)
    store.open()
    units = [
        add(
            0,
            "/content/site",
            node("/content/site", title="Site"),
            file_node("/content/site/small.txt", files["/content/site/small.txt"]),
            file_node("/content/site/stale.txt", b"replaced by the next ADD"),
        ),
        add(
            1,
            "/content/site",
            node("/content/site", title="Site"),
            file_node("/content/site/small.txt", files["/content/site/small.txt"]),
            node("/content/site/img"),
            *(
                ref_file(p, put_ref(blobs, files[p]))
                for p in ("/content/site/img/big.bin", "/content/site/img/empty.bin")
            ),
            ref_file("/content/site/doc.txt", put_ref(blobs, files["/content/site/doc.txt"])),
        ),
        add(2, "/content/gone", node("/content/gone", x="y")),
        delete(3, "/content/gone"),
    ]
    store.commit(new_change_set(units[:1]))
    store.commit(new_change_set(units[1:]))
    return store, files


def assert_exported(out: Path, files: dict[str, bytes]) -> None:
    expected = {p.removeprefix("/"): sha(data) for p, data in files.items()}
    exported = {k: v for k, v in tree_digest(out).items() if not k.endswith(SIDECAR_SUFFIX)}
    assert exported == expected


@pytest.mark.integration
def test_export_from_a_delta_store_with_local_blobs(
    spark: Any, tmp_path: Path, blobs: BlobStore
) -> None:
    store, files = build_store(spark, str(tmp_path / "store"), blobs)

    assert [e.path for e in list_tree(store, "/content")] == [
        "/content/site",
        "/content/site/doc.txt",
        "/content/site/img",
        "/content/site/img/big.bin",
        "/content/site/img/empty.bin",
        "/content/site/small.txt",
    ]
    assert read_node(store, "/content/site")["properties"] == {"title": "Site"}
    with pytest.raises(NodeNotFound):
        read_node(store, "/content/gone")

    report = export_tree(store, blobs, "/content", tmp_path / "out")
    assert report.files == 4
    assert report.file_bytes == sum(map(len, files.values()))
    assert_exported(tmp_path / "out", files)
    # node() without a jcr:primaryType keeps its properties in a sidecar
    sidecar = tmp_path / "out" / "content" / ("site" + SIDECAR_SUFFIX)
    assert json.loads(sidecar.read_text()) == {"title": "Site"}

    big = store.node("/content/site/img/big.bin")
    assert big is not None
    key = key_of(big.binaries[FILE_DATA])
    blobs.put_bytes(key, bytes(len(files["/content/site/img/big.bin"])))  # same size, zeros
    with pytest.raises(BinaryCorrupt, match="sha256 mismatch"):
        export_tree(store, blobs, "/content", tmp_path / "again")
    blobs.delete(key)
    with pytest.raises(BinaryMissing, match=key):
        export_tree(store, blobs, "/content", tmp_path / "again")


@pytest.mark.integration
def test_export_with_blobs_on_the_s3_server(
    spark: Any, tmp_path: Path, s3_service: Any, unique_name: str
) -> None:
    settings = BlobStoreSettings(
        backend="s3",
        endpoint_url=s3_service.endpoint_url,
        access_key=s3_service.access_key,
        secret_key=s3_service.secret_key,
        region=s3_service.region,
        bucket=unique_name,
        create_bucket=True,
    )
    with open_blob_store(settings) as blobs:
        store, files = build_store(spark, str(tmp_path / "store"), blobs)
        export_tree(store, blobs, "/content", tmp_path / "out")
        assert_exported(tmp_path / "out", files)

        doc = store.node("/content/site/doc.txt")
        assert doc is not None
        key = key_of(doc.binaries[FILE_DATA])
        blobs.put_bytes(key, files["/content/site/doc.txt"][:-1])  # one byte short
        with pytest.raises(BinaryCorrupt, match="size mismatch"):
            export_tree(store, blobs, "/content/site/doc.txt", tmp_path / "short")
        blobs.delete(key)
        with (
            pytest.raises(BinaryMissing, match=key),
            open_binary(store, blobs, "/content/site/doc.txt") as stream,
        ):
            stream.read()
