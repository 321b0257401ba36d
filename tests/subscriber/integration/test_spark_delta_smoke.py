"""Local PySpark with the jars of deploy/spark-jars.sh: Delta tables on disk and on S3 (s3a)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import services
from tests.services import S3Service

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not services.java_available(), reason="Spark needs Java (17+)"),
]


def _write_read_and_skip_replayed_commit(spark: Any, path: str) -> None:
    spark.range(0, 100).write.format("delta").save(path)
    for _ in range(2):  # the second append replays the same (appId, version): Delta skips it
        (
            spark.range(100, 150)
            .write.format("delta")
            .mode("append")
            .option("txnAppId", "smoke")
            .option("txnVersion", 1)
            .save(path)
        )
    table = spark.read.format("delta").load(path)
    assert sorted(row.id for row in table.collect()) == list(range(150))


def test_delta_table_on_local_disk(spark: Any, tmp_path: Path) -> None:
    _write_read_and_skip_replayed_commit(spark, str(tmp_path / "table"))


@pytest.mark.slow
def test_delta_table_on_s3_through_s3a(spark: Any, s3_service: S3Service, unique_name: str) -> None:
    s3 = services.s3_client(s3_service)
    s3.create_bucket(Bucket=unique_name)
    services.use_s3(spark, s3_service)
    _write_read_and_skip_replayed_commit(spark, f"s3a://{unique_name}/tables/smoke")
    keys = [
        obj["Key"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=unique_name)
        for obj in page.get("Contents", [])
    ]
    assert any(key.startswith("tables/smoke/_delta_log/") for key in keys)
