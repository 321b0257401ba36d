"""Store paths and their writer lease (subscriber.writer.location, lease.lease_place): each
scheme scd accepts gets a lease every writer of the store sees; a foreign scheme is refused
unless the operator vouches for one host; hostile and odd paths are refused with the reason,
never taken for a local directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr

from blobstore.settings import BlobStoreSettings
from runtime.errors import ConfigError
from subscriber.errors import StorePathError
from subscriber.settings import SubscriberSettings
from subscriber.spark import spark_config
from subscriber.writer.lease import (
    LocalLeaseObject,
    S3LeaseObject,
    lease_object,
    lease_place,
)
from subscriber.writer.location import ForeignStore, LocalStore, S3Store, store_location

S3 = BlobStoreSettings(
    backend="s3",
    endpoint_url="http://127.0.0.1:9000",
    access_key="AKIDEXAMPLE",
    secret_key=SecretStr("s3-secret-value"),
)
AWS = BlobStoreSettings(backend="s3", region="eu-west-1")  # no endpoint: AWS itself


@pytest.mark.parametrize(
    ("path", "location"),
    [
        ("/var/scd/store", LocalStore(Path("/var/scd/store"))),
        ("relative/store", LocalStore(Path("relative/store"))),
        ("./my:store", LocalStore(Path("./my:store"))),  # a "/" before the ":": no scheme
        ("file:///var/scd/store", LocalStore(Path("/var/scd/store"))),
        ("file:/var/scd/store", LocalStore(Path("/var/scd/store"))),
        ("file://localhost/var/store", LocalStore(Path("/var/store"))),
        ("s3a://stores/edge-a", S3Store("s3a", "stores", "edge-a")),
        ("s3a://stores//edge-a//x/", S3Store("s3a", "stores", "edge-a/x")),
        ("s3a://stores", S3Store("s3a", "stores", "")),
        ("s3://stores/edge-a", S3Store("s3", "stores", "edge-a")),
        ("gs://no-such-bucket/store", ForeignStore("gs", "gs://no-such-bucket/store")),
        (
            "abfss://c@acct.dfs.core.windows.net/s",
            ForeignStore("abfss", "abfss://c@acct.dfs.core.windows.net/s"),
        ),
        ("hdfs://nn:8020//a/../b/", ForeignStore("hdfs", "hdfs://nn:8020/b")),
        ("s3n://old/store", ForeignStore("s3n", "s3n://old/store")),
        ("store:1", ForeignStore("store", "store:1")),  # Hadoop reads a scheme here too
    ],
)
def test_each_path_is_read_as_hadoop_opens_it(path: str, location: object) -> None:
    assert store_location(path) == location


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("/store\x00/x", "control character"),
        ("s3a://b/store\n", "control character"),
        ("/" + "a" * 5000, "longer than"),
        ("S3A://stores/edge-a", "lower case (s3a:)"),
        ("GS://bucket/x", "lower case (gs:)"),
        ("s3a:/stores/edge-a", "s3a://bucket/prefix"),
        ("s3a:stores", "s3a://bucket/prefix"),
        ("s3a:///edge-a", "bucket"),
        ("s3a://Stores/edge-a", "bucket"),
        ("s3a://under_score/edge-a", "bucket"),
        ("s3a://key:secret@stores/edge-a", "credentials"),
        ("s3://stores:9000/edge-a", "credentials or a port"),
        ("s3a://stores/a/../b", "'..'"),
        ("s3a://stores/./b", "'.'"),
        ("file://other-host/var/store", "names a host"),
        ("file:relative", "absolute"),
    ],
)
def test_malformed_paths_are_refused_with_the_reason(path: str, reason: str) -> None:
    with pytest.raises(StorePathError) as raised:
        store_location(path)
    assert reason in str(raised.value)
    assert "secret" not in str(raised.value)
    with pytest.raises(ConfigError, match=r"^store_path: "):
        lease_place(path, S3)


@pytest.mark.parametrize("path", ["gs://no-such-bucket/store", "abfss://c@a/s", "hdfs://nn/s"])
def test_a_foreign_store_is_refused_unless_one_host_is_vouched_for(
    path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as raised:
        lease_object(path, S3)
    message = str(raised.value)
    scheme = path.partition(":")[0]
    assert f"a store on {scheme}:// would have none" in message
    assert "SCD_SUBSCRIBER_SINGLE_HOST_LEASE_DIR" in message
    assert list(tmp_path.iterdir()) == []  # no gs:/... folder in the working directory
    leases = tmp_path / "leases"
    lease = lease_object(path, None, leases)
    assert isinstance(lease, LocalLeaseObject)
    assert lease.path.parent.parent == leases
    # Every spelling of the store shares one lease; another store has its own.
    assert lease_object(path + "//", None, leases).where == lease.where
    assert lease_object(path + "/other", None, leases).where != lease.where


def test_the_daemon_refuses_a_store_on_gs_at_start_with_exit_code_2(tmp_path: Path) -> None:
    """The issue's case: it used to make a local folder gs:/... and fail every 5 s forever."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCD_")}
    env["SCD_SUBSCRIBER_STORE_PATH"] = "gs://no-such-bucket/store"
    done = subprocess.run(
        [sys.executable, "-m", "scd", "subscriber"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("scd: agent subscriber: store_path: scd has a writer lease")
    assert "a store on gs:// would have none" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_local_stores_keep_the_lease_beside_the_table(tmp_path: Path) -> None:
    for path in (str(tmp_path / "store"), f"file://{tmp_path}/store"):
        lease = lease_object(path, None)
        assert isinstance(lease, LocalLeaseObject)
        assert lease.path == tmp_path / "store" / "_scd_writer" / "lease.json"


@pytest.mark.parametrize("scheme", ["s3a", "s3"])
def test_s3_stores_lease_one_object_beside_the_table(scheme: str) -> None:
    lease = lease_object(f"{scheme}://stores//edge-a/", S3)
    assert isinstance(lease, S3LeaseObject)
    assert (lease.bucket, lease.key) == ("stores", "edge-a/_scd_writer/lease.json")
    bucket = lease_object(f"{scheme}://stores", S3)
    assert isinstance(bucket, S3LeaseObject)
    assert bucket.key == "_scd_writer/lease.json"


def test_an_s3_store_needs_s3_settings_but_not_an_endpoint() -> None:
    local = BlobStoreSettings(backend="local", local_root=Path("/tmp/blobs"))
    for blobs in (None, local):
        with pytest.raises(ConfigError, match="SCD_BLOB_BACKEND=s3"):
            lease_place("s3a://stores/edge-a", blobs)
    lease = lease_object("s3a://stores/edge-a", AWS)
    assert isinstance(lease, S3LeaseObject)
    assert lease.client.meta.region_name == "eu-west-1"
    assert lease.client.meta.endpoint_url.startswith("https://")


def test_spark_reaches_aws_without_an_endpoint_and_serves_s3_by_s3a() -> None:
    aws = spark_config(SubscriberSettings(store_path="s3a://stores/a", blobstore=AWS))
    assert aws["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert not [
        k for k in aws if k.startswith("spark.hadoop.fs.s3a.endpoint") and "region" not in k
    ]
    assert "spark.hadoop.fs.s3a.path.style.access" not in aws
    assert "spark.hadoop.fs.s3.impl" not in aws
    alias = spark_config(SubscriberSettings(store_path="s3://stores/a", blobstore=S3))
    assert alias["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert alias["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert alias["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert "hadoop-aws" in alias["spark.jars.packages"]
    on_gs = spark_config(SubscriberSettings(store_path="gs://b/a", blobstore=S3))
    assert not [k for k in on_gs if "s3" in k]
    assert "hadoop-aws" not in on_gs["spark.jars.packages"]


def test_the_setting_is_a_path_and_empty_means_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCD_SUBSCRIBER_SINGLE_HOST_LEASE_DIR", "/var/lib/scd/leases")
    assert SubscriberSettings().single_host_lease_dir == Path("/var/lib/scd/leases")
    monkeypatch.setenv("SCD_SUBSCRIBER_SINGLE_HOST_LEASE_DIR", "")
    assert SubscriberSettings().single_host_lease_dir is None
