"""The tree reader's parts that need no table: delta-rs' S3 options from the blob store's
settings, the literals and path ranges of its scans, the covering scopes, and its errors
(tests/subscriber/integration/test_tree_readers.py reads real stores)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from blobstore.settings import BlobStoreSettings
from subscriber.errors import TreeReadError
from subscriber.tree_reader import (
    CoverIndex,
    Scopes,
    open_tree,
    paths_predicate,
    places,
    sql_literal,
    storage_options,
)


def s3(endpoint: str | None) -> BlobStoreSettings:
    return BlobStoreSettings(
        backend="s3",
        endpoint_url=endpoint,
        access_key="key",
        secret_key=SecretStr("secret"),
        region="eu-west-1",
        max_attempts=2,
    )


def test_s3_options_come_from_the_blob_store_settings() -> None:
    assert storage_options("/var/scd/store", None) == {}
    options = storage_options("s3a://content/sub-1", s3("http://127.0.0.1:9000"))
    assert options == {
        "aws_region": "eu-west-1",
        "aws_virtual_hosted_style_request": "false",
        "connect_timeout": "2.0s",
        "timeout": "30.0s",
        "max_retries": "1",
        "aws_endpoint_url": "http://127.0.0.1:9000",
        "aws_allow_http": "true",
        "aws_access_key_id": "key",
        "aws_secret_access_key": "secret",
    }
    assert storage_options("s3a://c/s", s3("https://s3.example"))["aws_allow_http"] == "false"
    assert "aws_endpoint_url" not in storage_options("s3a://c/s", s3(None))  # AWS itself
    local = BlobStoreSettings(backend="local", local_root=Path("/tmp/blobs"))
    for blobs in (None, local):
        with pytest.raises(TreeReadError, match="no S3 blob store"):
            storage_options("s3a://c/s", blobs)


def test_literals_and_path_ranges() -> None:
    assert sql_literal("/q'uote") == "'/q''uote'"
    with pytest.raises(TreeReadError, match="NUL"):
        sql_literal("/a\x00b")
    assert paths_predicate("/", deep=True) == "kind = 'node'"
    assert paths_predicate("/a", deep=True) == (
        "kind = 'node' AND (path = '/a' OR (path >= '/a/' AND path < '/a0'))"
    )
    assert paths_predicate("/a", deep=False).endswith("AND parent = '/a'))")
    assert places("/") == ["/", "/"]
    assert places("/a/b") == ["/", "/a", "/a/b"]


def test_a_version_is_covered_by_a_later_scope_at_it_or_a_deep_one_above() -> None:
    scopes = Scopes.from_rows(
        [
            {"path": "/a", "offset": 5, "info": None},
            {"path": "/a/b", "offset": 3, "info": "deep"},
            {"path": "/", "offset": 1, "info": "deep"},
        ]
    )
    cover = CoverIndex(scopes)
    assert cover.offset("/a") == 5  # its own scope
    assert cover.offset("/a/c") == 1  # a shallow scope covers only its path
    assert cover.offset("/a/b/c/d") == 3
    assert cover.offset("/") == 1
    inside = scopes.reaching("/a/b/c")
    assert inside.at == {}
    assert inside.deep == {"/a/b": 3, "/": 1}  # the deep ones above still cover it
    assert CoverIndex(inside).offset("/a/b/c/x") == 3


def test_a_missing_store_is_named(tmp_path: Path) -> None:
    with pytest.raises(TreeReadError, match="no content store at"):
        open_tree(str(tmp_path / "none"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(TreeReadError, match="no content store at"):
        open_tree(str(tmp_path / "empty"))
