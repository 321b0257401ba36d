"""`scd content ls|cat|export` as a user runs them: separate processes on a real Delta store,
read without a JVM (a Java that cannot start), on a directory and on S3; `scd content maintain`
in Spark."""

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
from subscriber.http import Health, HealthServer
from subscriber.maintenance.delta_table import latest_version
from subscriber.reads.api import ReadApi
from subscriber.reads.sources import read_model
from subscriber.settings import SubscriberSettings
from subscriber.store.delta import DeltaStore
from tests import services
from tests.services import S3Service, spark_jars
from tests.subscriber.packages import add, file_node, new_change_set, node
from tests.subscriber.reads import OneModel

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BIG = bytes(range(256)) * 400  # 100 KiB, stored in the blob store by reference
# The reads start no JVM: one would fail to start.
NO_JVM = {"JAVA_HOME": "/nonexistent", "SCD_SUBSCRIBER_SPARK_JARS": ""}


def scd(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "scd.cli", *args],
        env=env,
        capture_output=True,
        timeout=300,
        check=False,
    )


def binary_node(path: str, ref: BlobRef) -> Node:
    n = Node(path=path)
    n.properties[NODE_TYPE].string_value = FILE_TYPE
    n.properties[FILE_DATA].binary_value.CopyFrom(Binary(ref=ref))
    return n


def big_and_bad(blobs: LocalBlobStore) -> tuple[Node, Node, BlobRef]:
    """/site/big.bin, BIG in the blob store by reference, and /other/bad.bin: the same blob
    under a reference claiming other bytes, never handed out as good; and BIG's reference."""
    ref = blobs.put_content_addressed(io.BytesIO(BIG), len(BIG))
    big = binary_node("/site/big.bin", BlobRef(key=ref.key, size=ref.size, sha256=ref.sha256))
    bad = binary_node("/other/bad.bin", BlobRef(key=ref.key, size=ref.size, sha256="0" * 64))
    return big, bad, BlobRef(key=ref.key, size=ref.size, sha256=ref.sha256)


def local_env(store_path: Path, blobs: Path) -> dict[str, str]:
    """A reader of a store in a directory, its blobs in a local blob store, no JVM."""
    return {
        **os.environ,
        **NO_JVM,
        "SCD_SUBSCRIBER_STORE_PATH": str(store_path),
        "SCD_BLOB_BACKEND": "local",
        "SCD_BLOB_LOCAL_ROOT": str(blobs),
    }


def test_ls_cat_export(spark: Any, tmp_path: Path) -> None:
    blobs = LocalBlobStore(tmp_path / "blobs")
    big, bad, ref = big_and_bad(blobs)
    store_path = tmp_path / "store"
    store = DeltaStore(spark, str(store_path))
    store.open()
    store.commit(
        new_change_set(
            [
                add(0, "/site", node("/site"), file_node("/site/a.txt", b"hello\n"), big),
                add(1, "/other", node("/other"), bad),
            ],
        )
    )
    env = local_env(store_path, tmp_path / "blobs")

    listing = scd(env, "content", "ls", "/site", "--json")
    assert listing.returncode == 0, listing.stderr.decode()
    paths = {e["path"]: e for e in json.loads(listing.stdout)}
    assert set(paths) == {"/site", "/site/a.txt", "/site/big.bin"}
    assert paths["/site/big.bin"]["binary_bytes"] == len(BIG)
    text = scd(env, "content", "ls", "/", "--shallow")
    assert text.returncode == 0, text.stderr.decode()
    assert text.stdout.decode().splitlines() == [
        "/other\t-\t0 props\t",
        "/site\t-\t0 props\t",
    ]

    cat = scd(env, "content", "cat", "/site/big.bin")
    assert cat.returncode == 0, cat.stderr.decode()
    assert hashlib.sha256(cat.stdout).digest() == hashlib.sha256(BIG).digest()
    props = scd(env, "content", "cat", "--properties", "/site/big.bin")
    assert props.returncode == 0, props.stderr.decode()
    assert json.loads(props.stdout)["properties"][FILE_DATA]["sha256"] == ref.sha256

    out = tmp_path / "out"
    export = scd(env, "content", "export", "/site", str(out))
    assert export.returncode == 0, export.stderr.decode()
    assert (out / "site" / "a.txt").read_bytes() == b"hello\n"
    assert (out / "site" / "big.bin").read_bytes() == BIG

    missing = scd(env, "content", "cat", "/site/nope")
    assert missing.returncode == 1
    assert b"/site/nope" in missing.stderr.splitlines()[-1]
    corrupt = scd(env, "content", "cat", "/other/bad.bin")
    assert corrupt.returncode == 1
    assert b"sha256 mismatch" in corrupt.stderr.splitlines()[-1]
    refused = scd(env, "content", "export", "/other", str(tmp_path / "bad"))
    assert refused.returncode == 1
    assert b"sha256 mismatch" in refused.stderr.splitlines()[-1]
    assert not (tmp_path / "bad" / "other" / "bad.bin").exists()
    nowhere = scd({**env, "SCD_SUBSCRIBER_STORE_PATH": str(tmp_path / "none")}, "content", "ls")
    assert nowhere.returncode == 1
    assert b"no content store at" in nowhere.stderr


def test_ls_cat_export_through_a_running_subscriber_s_read_api(spark: Any, tmp_path: Path) -> None:
    """`scd content --url`: the same output and checks as on the store, from a read API that
    serves the store (its read token from the environment), with no store or blob settings."""
    blobs = LocalBlobStore(tmp_path / "blobs")
    big, bad, _ = big_and_bad(blobs)
    store_path = tmp_path / "store"
    store = DeltaStore(spark, str(store_path))
    store.open()
    store.commit(
        new_change_set(
            [
                add(
                    0,
                    "/site",
                    node("/site", title="Site"),
                    file_node("/site/a.txt", b"hi\n"),
                    big,
                    node("/site/d/deep", n=3, ok="yes"),
                ),
                add(1, "/other", node("/other"), bad),
            ],
        )
    )
    on_store = local_env(store_path, tmp_path / "blobs")
    settings = SubscriberSettings(agent_name="solo", store_path=str(store_path))
    model = read_model(settings, store, tmp_path / "index", lambda: None)
    assert model is not None
    model.start()
    assert model.wait_version(latest_version(spark, store.location), 60)
    api = ReadApi(OneModel(model), blobs, "read-secret")
    health = Health(agent="solo", instance_id="i", processed_offset=1, state="IDLE")
    server = HealthServer(lambda: health, lambda: (True, "ok"), lambda: b"", reads=api)
    server.start()
    try:
        clean = {k: v for k, v in on_store.items() if not k.startswith(("SCD_BLOB", "SCD_SUB"))}
        remote = {**clean, "SCD_SUBSCRIBER_READ_TOKEN": "read-secret"}

        def both(*args: str) -> tuple[bytes, bytes]:
            local = scd(on_store, "content", *args)
            through = scd(remote, "content", "--url", server.url, *args)
            assert local.returncode == 0, local.stderr.decode()
            assert through.returncode == 0, through.stderr.decode()
            return local.stdout, through.stdout

        for args in (["ls", "/site", "--json"], ["ls", "/", "--shallow"], ["ls"]):
            local, through = both(*args)
            assert through == local, args
        local, through = both("cat", "/site/big.bin")
        assert through == local == BIG
        local, through = both("cat", "--properties", "/site/d/deep")
        assert json.loads(through) == json.loads(local)
        out = tmp_path / "out"
        export = scd(remote, "content", "--url", server.url, "export", "/site", str(out))
        assert export.returncode == 0, export.stderr.decode()
        assert (out / "site" / "a.txt").read_bytes() == b"hi\n"
        assert (out / "site" / "big.bin").read_bytes() == BIG

        missing = scd(remote, "content", "--url", server.url, "cat", "/site/nope")
        assert missing.returncode == 1
        assert b"/site/nope" in missing.stderr.splitlines()[-1]
        corrupt = scd(remote, "content", "--url", server.url, "export", "/other", str(out))
        assert corrupt.returncode == 1
        assert b"sha256" in corrupt.stderr.splitlines()[-1], corrupt.stderr
        assert not (out / "other" / "bad.bin").exists()
        no_token = scd(clean, "content", "--url", server.url, "ls")
        assert no_token.returncode == 1
        assert b"401" in no_token.stderr.splitlines()[-1]
        no_agent = scd(remote, "content", "--url", server.url, "--agent", "x", "cat", "/site")
        assert no_agent.returncode == 1
        assert b"no agent" in no_agent.stderr.splitlines()[-1]
    finally:
        server.stop()
        api.close()
        model.stop()


def test_ls_and_cat_of_a_store_on_s3_with_the_blob_store_s_settings(
    spark: Any, s3_service: S3Service, unique_name: str
) -> None:
    """What a client of the compose cluster has (deploy/compose.sh env): SCD_BLOB_* of the S3
    server and the store's s3a:// location."""
    services.s3_client(s3_service).create_bucket(Bucket=unique_name)
    services.use_s3(spark, s3_service)
    location = f"s3a://{unique_name}/subscriber-1"
    store = DeltaStore(spark, location)
    store.open()
    store.commit(new_change_set([add(0, "/site", node("/site"), file_node("/site/a", b"s3\n"))]))
    env = {
        **os.environ,
        **NO_JVM,
        "SCD_SUBSCRIBER_STORE_PATH": location,
        "SCD_BLOB_BACKEND": "s3",
        "SCD_BLOB_BUCKET": unique_name,
        "SCD_BLOB_ENDPOINT_URL": s3_service.endpoint_url,
        "SCD_BLOB_REGION": s3_service.region,
        "SCD_BLOB_ACCESS_KEY": s3_service.access_key,
        "SCD_BLOB_SECRET_KEY": s3_service.secret_key,
    }
    listing = scd(env, "content", "ls", "/site")
    assert listing.returncode == 0, listing.stderr.decode()
    assert [line.split("\t")[0] for line in listing.stdout.decode().splitlines()] == [
        "/site",
        "/site/a",
    ]
    cat = scd(env, "content", "cat", "/site/a")
    assert (cat.returncode, cat.stdout) == (0, b"s3\n"), cat.stderr.decode()
    denied = scd({**env, "SCD_BLOB_SECRET_KEY": "wrong-secret-key"}, "content", "ls", "/site")
    assert denied.returncode == 1
    assert b"scd: error:" in denied.stderr.splitlines()[-1]


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
