"""`scd content ls|cat|export` as a user runs them: separate processes on a real Delta store."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from blobstore.local import LocalBlobStore
from journal.content.package import FILE_DATA, FILE_TYPE, NODE_TYPE, Binary, BlobRef, Node
from subscriber.store.delta import DeltaStore
from tests.services import spark_jars
from tests.subscriber.packages import add, file_node, new_change_set, node

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BIG = bytes(range(256)) * 400  # 100 KiB, stored in the blob store by reference


def scd(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "scd.cli", *args],
        env=env,
        capture_output=True,
        timeout=300,
        check=False,
    )


def test_ls_cat_export(spark: Any, tmp_path: Path) -> None:
    blobs = LocalBlobStore(tmp_path / "blobs")
    ref = blobs.put_content_addressed(io.BytesIO(BIG), len(BIG))
    big = Node(path="/site/big.bin")
    big.properties[NODE_TYPE].string_value = FILE_TYPE
    big.properties[FILE_DATA].binary_value.CopyFrom(
        Binary(ref=BlobRef(key=ref.key, size=ref.size, sha256=ref.sha256))
    )
    store_path = tmp_path / "store"
    store = DeltaStore(spark, str(store_path))
    store.open()
    store.commit(
        new_change_set(
            [add(0, "/site", node("/site"), file_node("/site/a.txt", b"hello\n"), big)],
        )
    )
    env = {
        **os.environ,
        "SCD_SUBSCRIBER_STORE_PATH": str(store_path),
        "SCD_SUBSCRIBER_SPARK_JARS": ",".join(spark_jars()),
        "SCD_BLOB_BACKEND": "local",
        "SCD_BLOB_LOCAL_ROOT": str(tmp_path / "blobs"),
    }

    listing = scd(env, "content", "ls", "/site", "--json")
    assert listing.returncode == 0, listing.stderr.decode()
    paths = {e["path"]: e for e in json.loads(listing.stdout)}
    assert set(paths) == {"/site", "/site/a.txt", "/site/big.bin"}
    assert paths["/site/big.bin"]["binary_bytes"] == len(BIG)

    cat = scd(env, "content", "cat", "/site/big.bin")
    assert cat.returncode == 0, cat.stderr.decode()
    assert hashlib.sha256(cat.stdout).digest() == hashlib.sha256(BIG).digest()

    out = tmp_path / "out"
    export = scd(env, "content", "export", "/site", str(out))
    assert export.returncode == 0, export.stderr.decode()
    assert (out / "site" / "a.txt").read_bytes() == b"hello\n"
    assert (out / "site" / "big.bin").read_bytes() == BIG

    missing = scd(env, "content", "cat", "/site/nope")
    assert missing.returncode == 1
    assert b"/site/nope" in missing.stderr.splitlines()[-1]


def test_maintain_compacts_and_vacuums_without_changing_the_content(
    spark: Any, tmp_path: Path
) -> None:
    store_path = tmp_path / "store"
    store = DeltaStore(spark, str(store_path))
    store.open()
    for offset in range(6):  # one file per commit, and versions to fold
        page = f"/site/p{offset % 4}"
        store.commit(new_change_set([add(offset, page, node(page, v=str(offset)))]))
    before = {n.path: n for n in DeltaStore(spark, str(store_path)).nodes("/")}
    env = {**os.environ, "SCD_SUBSCRIBER_SPARK_JARS": ",".join(spark_jars())}

    args = ["maintain", "--store", str(store_path), "--retention-hours", "0", "--json"]
    done = scd(env, "content", *args)
    assert done.returncode == 0, done.stderr.decode()
    reports = {r["step"]: r for r in json.loads(done.stdout)}  # Spark's output: on stderr
    assert list(reports) == ["purge", "fold", "compact", "retention", "checkpoint", "vacuum"]
    assert reports["compact"]["files_after"] < reports["compact"]["files_before"]
    assert reports["vacuum"]["files_deleted"] > 0
    after = DeltaStore(spark, str(store_path))
    assert after.open().offset == 5
    assert {n.path: n for n in after.nodes("/")} == before
    assert after.file_stats().files == reports["compact"]["files_after"]
