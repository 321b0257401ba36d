"""Cost of the writer lease on each store scheme scd accepts (subscriber/writer/location.py).

The lease is not on the commit path: the import asks ``WriterLease.held`` before each commit
(a clock comparison) and the lease thread renews it every ``WRITER_LEASE_RENEW_S`` (2 s).
So the cost per commit is that check, and the cost per renewal one read-compare-swap of the
lease object: a ``flock``-guarded file replace for local paths, ``file://`` and a foreign
store under SCD_SUBSCRIBER_SINGLE_HOST_LEASE_DIR; a conditional PUT for s3a:// with an
endpoint, s3:// (the alias) and s3a:// without one (botocore's own endpoint lookup, pointed
at the server by AWS_ENDPOINT_URL as it would be at AWS). S3 schemes need the S3 server of
``eval "$(bash deploy/services.sh env)"``; without it they are left out.

    .venv/bin/python -m bench.writer_lease [--renewals 200] > result.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import boto3
from pydantic import SecretStr

from blobstore.settings import BlobStoreSettings
from runtime.stats import percentile
from subscriber.writer.lease import WriterLease, lease_object

TTL_S, RENEW_S = 12.0, 2.0
HELD_CHECKS = 100_000


def measure(lease: WriterLease, renewals: int) -> dict[str, Any]:
    started = time.perf_counter()
    assert lease.try_acquire(), "the lease was not free"
    acquire_ms = (time.perf_counter() - started) * 1000
    times = []
    for _ in range(renewals):
        started = time.perf_counter()
        assert lease.renew(), "the lease was lost"
        times.append((time.perf_counter() - started) * 1000)
    started = time.perf_counter()
    for _ in range(HELD_CHECKS):
        assert lease.held
    held_ns = (time.perf_counter() - started) / HELD_CHECKS * 1e9
    lease.release()
    return {
        "acquire_ms": round(acquire_ms, 2),
        "renew_ms_p50": round(statistics.median(times), 2),
        "renew_ms_p99": round(percentile(times, 99), 2),
        "renew_ms_mean": round(statistics.fmean(times), 2),
        "per_commit_held_check_ns": round(held_ns, 1),
        "lease_io_share_of_time": round(statistics.fmean(times) / 1000 / RENEW_S, 5),
    }


def s3_cases(bucket: str) -> dict[str, tuple[str, BlobStoreSettings, dict[str, str]]]:
    endpoint = os.environ["SCD_TEST_S3_ENDPOINT"]

    def blobs(with_endpoint: bool) -> BlobStoreSettings:
        return BlobStoreSettings(
            backend="s3",
            endpoint_url=endpoint if with_endpoint else None,
            region=os.environ.get("SCD_TEST_S3_REGION", "us-east-1"),
            access_key=os.environ["SCD_TEST_S3_ACCESS_KEY"],
            secret_key=SecretStr(os.environ["SCD_TEST_S3_SECRET_KEY"]),
        )

    return {
        "s3a": (f"s3a://{bucket}/s3a", blobs(True), {}),
        "s3": (f"s3://{bucket}/s3", blobs(True), {}),
        "s3a_no_endpoint": (f"s3a://{bucket}/aws", blobs(False), {"AWS_ENDPOINT_URL": endpoint}),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--renewals", type=int, default=200)
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        local = {
            "local_path": (str(root / "store"), None),
            "file_url": (f"file://{root}/file-store", None),
            "gs_single_host": ("gs://bench-bucket/store", root / "leases"),
        }
        for name, (path, single_host) in local.items():
            lease = WriterLease(lease_object(path, None, single_host), name, TTL_S, RENEW_S)
            results[name] = measure(lease, args.renewals)
        if "SCD_TEST_S3_ENDPOINT" in os.environ:
            bucket = f"lease-bench-{uuid.uuid4().hex[:8]}"
            boto3.client(
                "s3",
                endpoint_url=os.environ["SCD_TEST_S3_ENDPOINT"],
                aws_access_key_id=os.environ["SCD_TEST_S3_ACCESS_KEY"],
                aws_secret_access_key=os.environ["SCD_TEST_S3_SECRET_KEY"],
                region_name=os.environ.get("SCD_TEST_S3_REGION", "us-east-1"),
            ).create_bucket(Bucket=bucket)
            for name, (path, blobs, env) in s3_cases(bucket).items():
                os.environ.update(env)
                lease = WriterLease(lease_object(path, blobs), name, TTL_S, RENEW_S)
                results[name] = measure(lease, args.renewals)
                for key in env:
                    del os.environ[key]
    json.dump(
        {
            "renewals": args.renewals,
            "renew_every_s": RENEW_S,
            "load_average": os.getloadavg()[0],
            "schemes": results,
        },
        sys.stdout,
        indent=2,
    )
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
