from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from blobstore.local import LocalBlobStore
from journal.content.package import ContentPackage, decode_package
from journal.content.rules import ContentRuleError
from journal.wire.messages import ReqType
from publisher.distribute.builder import PackageBuilder
from publisher.distribute.content_source import DirectoryContentSource
from publisher.distribute.request import DistributeRequest
from publisher.errors import ContentNotFound, InvalidRequest, PackageTooLarge
from tests.blobstore.reading import read_blob

# A request breaking a content rule or another request rule: both answer 400.
Refused = (InvalidRequest, ContentRuleError)

THRESHOLD = 1024


@pytest.fixture
def tree(content_root: Path) -> Path:
    (content_root / "site" / "en").mkdir(parents=True)
    (content_root / "site" / "en" / "index.html").write_text("<h1>hi</h1>")
    (content_root / "site" / "en" / "big.bin").write_bytes(os.urandom(THRESHOLD + 1))
    (content_root / "site" / "logo.png").write_bytes(b"\x89PNG")
    (content_root / "site" / "en.props.json").write_text(
        json.dumps({"title": "English", "rank": 2, "tags": ["a", "b"]})
    )
    return content_root


def builder(blobs: LocalBlobStore, root: Path | None, **kw: Any) -> PackageBuilder:
    source = DirectoryContentSource(root) if root else None
    options: dict[str, Any] = {"binary_threshold_bytes": THRESHOLD, "max_package_bytes": 10**7}
    options.update(kw)
    return PackageBuilder(blobs, source, **options)


def build(b: PackageBuilder, **request: Any) -> ContentPackage:
    built = b.build(DistributeRequest.model_validate(request))
    return decode_package(built.data)


def paths_of(package: ContentPackage) -> list[str]:
    return [n.path for n in package.nodes]


def test_deep_path_exports_the_subtree_parents_first(blobs: LocalBlobStore, tree: Path) -> None:
    package = build(builder(blobs, tree), action="ADD", deepPaths=["/site"])
    assert paths_of(package) == [
        "/site",
        "/site/en",
        "/site/en/big.bin",
        "/site/en/index.html",
        "/site/logo.png",
    ]
    assert [(r.path, r.deep) for r in package.roots] == [("/site", True)]
    assert package.req_type == ReqType.ADD


def test_shallow_path_exports_the_node_only_with_its_sidecar(
    blobs: LocalBlobStore, tree: Path
) -> None:
    package = build(builder(blobs, tree), action="ADD", paths=["/site/en"])
    (node,) = package.nodes
    assert node.path == "/site/en"
    assert node.properties["jcr:primaryType"].string_value == "nt:folder"
    assert node.properties["title"].string_value == "English"
    assert node.properties["rank"].long_value == 2
    assert [v.string_value for v in node.properties["tags"].multi_value.values] == ["a", "b"]


def test_file_node_carries_bytes_type_and_modified_time(blobs: LocalBlobStore, tree: Path) -> None:
    package = build(builder(blobs, tree), action="ADD", paths=["/site/en/index.html"])
    (node,) = package.nodes
    props = node.properties
    assert props["jcr:primaryType"].string_value == "nt:file"
    assert props["jcr:data"].binary_value.inline == b"<h1>hi</h1>"
    assert props["jcr:mimeType"].string_value == "text/html"
    mtime = (tree / "site/en/index.html").stat().st_mtime_ns // 1_000_000
    assert props["jcr:lastModified"].date_ms == mtime


def test_large_binaries_go_to_the_blob_store_once(blobs: LocalBlobStore, tree: Path) -> None:
    b = builder(blobs, tree)
    first = b.build(DistributeRequest(action="ADD", paths=["/site/en/big.bin"]))  # type: ignore[arg-type]
    second = b.build(DistributeRequest(action="ADD", paths=["/site/en/big.bin"]))  # type: ignore[arg-type]
    node = decode_package(first.data).nodes[0]
    ref = node.properties["jcr:data"].binary_value.ref
    assert ref.size == THRESHOLD + 1
    assert ref.key.startswith("cas/sha256/")
    assert read_blob(blobs, ref.key) == (tree / "site/en/big.bin").read_bytes()
    assert first.blob_refs[0].key == second.blob_refs[0].key
    assert len(list(blobs.list("cas/"))) == 1


@pytest.mark.parametrize("action", ["DELETE", "TEST", "INVALIDATE"])
def test_non_add_actions_carry_paths_only_and_fresh_ids(
    blobs: LocalBlobStore, tree: Path, action: str
) -> None:
    b = builder(blobs, tree)
    one = b.build(DistributeRequest.model_validate({"action": action, "paths": ["/site"]}))
    two = b.build(DistributeRequest.model_validate({"action": action, "paths": ["/site"]}))
    package = decode_package(one.data)
    assert package.nodes == []
    assert [r.path for r in package.roots] == ["/site"]
    assert one.package_id != two.package_id


def test_inline_nodes_need_no_content_source(blobs: LocalBlobStore) -> None:
    package = build(
        builder(blobs, None),
        action="ADD",
        deepPaths=["/c"],
        nodes=[{"path": "/c/p", "properties": {"t": "x"}}, {"path": "/c", "properties": {}}],
        metadata={"origin": "test"},
    )
    assert paths_of(package) == ["/c", "/c/p"]
    assert package.metadata["origin"] == "test"


@pytest.mark.parametrize(
    ("request_body", "error", "reason"),
    [
        ({"action": "ADD"}, Refused, "at least one path"),
        ({"action": "DELETE", "paths": []}, Refused, "at least one path"),
        ({"action": "ADD", "paths": ["/../etc"]}, Refused, "traversal"),
        ({"action": "ADD", "deepPaths": ["relative"]}, Refused, "not absolute"),
        ({"action": "ADD", "paths": ["/nope"]}, ContentNotFound, "does not exist"),
        ({"action": "ADD", "paths": ["/site.props.json"]}, ContentNotFound, "sidecar"),
        (
            {"action": "ADD", "paths": ["/c"], "nodes": [{"path": "/c/child"}]},
            Refused,
            "outside the distributed paths",
        ),
        (
            {"action": "ADD", "deepPaths": ["/c"], "nodes": [{"path": "/c"}, {"path": "/c/"}]},
            Refused,
            "given twice",
        ),
        (
            {"action": "DELETE", "paths": ["/c"], "nodes": [{"path": "/c"}]},
            Refused,
            "paths only",
        ),
        ({"action": "ADD", "paths": ["/c"], "metadata": {"k": "\udc80"}}, Refused, "UTF-8"),
        ({"action": "ADD", "paths": ["/c"], "userId": "\udc80"}, Refused, "UTF-8"),
        (
            {"action": "ADD", "paths": ["/c"], "nodes": [{"path": "/c", "properties": {"": 1}}]},
            Refused,
            "property name",
        ),
    ],
)
def test_bad_requests_are_refused_with_the_reason(
    blobs: LocalBlobStore, tree: Path, request_body: dict[str, Any], error: type, reason: str
) -> None:
    (tree / "site.props.json").write_text("{}")
    with pytest.raises(error, match=reason):
        builder(blobs, tree).build(DistributeRequest.model_validate(request_body))


def test_add_without_content_source_or_node_is_refused(blobs: LocalBlobStore) -> None:
    with pytest.raises(ContentNotFound, match="no content source"):
        builder(blobs, None).build(
            DistributeRequest.model_validate({"action": "ADD", "paths": ["/x"]})
        )


def test_package_over_the_maximum_is_refused_with_size_and_limit(
    blobs: LocalBlobStore, content_root: Path
) -> None:
    (content_root / "d").mkdir()
    for i in range(5):
        (content_root / "d" / f"f{i}").write_bytes(os.urandom(900))
    b = builder(blobs, content_root, max_package_bytes=3000)
    with pytest.raises(PackageTooLarge) as info:
        b.build(DistributeRequest.model_validate({"action": "ADD", "deepPaths": ["/d"]}))
    assert info.value.limit == 3000
    assert info.value.size > 3000
    assert "3000" in str(info.value)


def test_non_utf8_file_names_are_refused_clearly(blobs: LocalBlobStore, content_root: Path) -> None:
    (content_root / "d").mkdir()
    os.close(os.open(os.fsencode(content_root / "d") + b"/bad\xff", os.O_CREAT | os.O_WRONLY))
    with pytest.raises(Refused, match=r"file name .*not valid UTF-8"):
        builder(blobs, content_root).build(
            DistributeRequest.model_validate({"action": "ADD", "deepPaths": ["/d"]})
        )


def test_symlinks_are_never_followed(
    blobs: LocalBlobStore, content_root: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not export")
    (content_root / "d").mkdir()
    (content_root / "d" / "link").symlink_to(secret)
    (content_root / "out").symlink_to(tmp_path)
    b = builder(blobs, content_root)
    package = build(b, action="ADD", deepPaths=["/d"])
    assert paths_of(package) == ["/d"]
    with pytest.raises(Refused, match="outside the content root"):
        build(b, action="ADD", paths=["/out/secret.txt"])
    with pytest.raises(Refused, match="outside the content root"):
        build(b, action="ADD", paths=["/d/link"])


def test_bad_sidecar_is_refused(blobs: LocalBlobStore, content_root: Path) -> None:
    (content_root / "a").write_text("x")
    (content_root / "a.props.json").write_text("{not json")
    with pytest.raises(Refused, match="sidecar of '/a' is not valid"):
        build(builder(blobs, content_root), action="ADD", paths=["/a"])
