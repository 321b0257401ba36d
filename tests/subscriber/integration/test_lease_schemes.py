"""The writer lease on each S3 spelling scd accepts, against the real S3 server: s3a:// with a
custom endpoint, s3a:// with none (AWS's default chain, here pointed at the server by
AWS_ENDPOINT_URL as it would be at AWS), and s3:// as the alias of s3a:// (the same object,
so an s3:// writer and an s3a:// writer of one store exclude each other); and a Delta table on
s3:// through the S3A file system that spark_config names for it."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr

from blobstore.settings import BlobStoreSettings
from subscriber.settings import SubscriberSettings
from subscriber.spark import set_hadoop, spark_config
from subscriber.writer.lease import WriterLease, lease_object
from tests import services
from tests.services import S3Service

pytestmark = pytest.mark.integration

TTL_S, RENEW_S = 12.0, 2.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def blob_settings(s3: S3Service, *, endpoint: bool) -> BlobStoreSettings:
    return BlobStoreSettings(
        backend="s3",
        endpoint_url=s3.endpoint_url if endpoint else None,
        region=s3.region,
        access_key=s3.access_key,
        secret_key=SecretStr(s3.secret_key),
    )


@pytest.mark.parametrize(
    ("first", "second", "endpoint"),
    [("s3a", "s3a", True), ("s3a", "s3a", False), ("s3", "s3a", True), ("s3a", "s3", False)],
)
def test_two_writers_of_one_s3_store_exclude_each_other(
    s3_service: S3Service,
    unique_name: str,
    monkeypatch: pytest.MonkeyPatch,
    first: str,
    second: str,
    endpoint: bool,
) -> None:
    if not endpoint:  # as at AWS: no SCD_BLOB_ENDPOINT_URL, botocore finds the endpoint itself
        monkeypatch.setenv("AWS_ENDPOINT_URL", s3_service.endpoint_url)
    services.s3_client(s3_service).create_bucket(Bucket=unique_name)
    blobs = blob_settings(s3_service, endpoint=endpoint)
    clock_a, clock_b = Clock(), Clock()
    a = WriterLease(
        lease_object(f"{first}://{unique_name}/store", blobs), "a", TTL_S, RENEW_S, clock_a
    )
    b = WriterLease(
        lease_object(f"{second}://{unique_name}//store/", blobs), "b", TTL_S, RENEW_S, clock_b
    )
    assert a.try_acquire()
    assert a.epoch == 1
    assert not b.try_acquire()
    for _ in range(3):  # renewed: never taken
        clock_a.now += RENEW_S
        clock_b.now += RENEW_S
        assert a.renew()
        assert not b.try_acquire()
    clock_b.now += TTL_S  # a stopped renewing: b takes over with the next epoch
    assert b.try_acquire()
    assert b.epoch == 2
    assert not a.renew()  # the deposed holder's conditional PUT is refused (412)
    head = services.s3_client(s3_service).get_object(
        Bucket=unique_name, Key="store/_scd_writer/lease.json"
    )
    assert b'"owner": "b"' in head["Body"].read()


@pytest.mark.slow
def test_a_delta_store_on_s3_is_served_by_s3a(
    spark: Any, s3_service: S3Service, unique_name: str
) -> None:
    services.s3_client(s3_service).create_bucket(Bucket=unique_name)
    services.use_s3(spark, s3_service)
    settings = SubscriberSettings(
        store_path=f"s3://{unique_name}/store", blobstore=blob_settings(s3_service, endpoint=True)
    )
    impl = {
        key.removeprefix("spark.hadoop."): value
        for key, value in spark_config(settings).items()
        if key == "spark.hadoop.fs.s3.impl"
    }
    set_hadoop(spark, impl)
    spark.range(0, 10).write.format("delta").save(settings.store_path)
    # The same table under its s3a:// spelling: one store, whichever the path says.
    table = spark.read.format("delta").load(f"s3a://{unique_name}/store")
    assert sorted(row.id for row in table.collect()) == list(range(10))
