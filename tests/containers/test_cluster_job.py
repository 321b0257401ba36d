"""The compose cluster does the job: a deep tree with binaries by reference and a package large
enough to spill, distributed through the publisher's published port, reach all three
subscribers' stores (Delta tables on the S3 container, imported on the Spark master and worker
containers) byte for byte; the console answers; `down` then `up` keeps the data and imports
only what is new.
"""

from __future__ import annotations

import random
import secrets
import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from blobstore.factory import open_blob_store
from blobstore.settings import BlobStoreSettings
from publisher.client import PublisherClient
from subscriber.export import export_tree
from subscriber.store.delta import DeltaStore
from tests.containers import checks
from tests.containers.compose import SUBSCRIBERS, UP_TIMEOUT_S, ComposeCluster, Endpoints
from tests.containers.conftest import Report
from tests.containers.driving import RUN_KEY, wait_imported
from tests.containers.site import (
    deep_add,
    large_files,
    make_deep_tree,
    make_spill_tree,
    tree_differences,
)

pytestmark = [pytest.mark.containers, pytest.mark.slow]

SITE = "/job/site"
MEDIA = "/job/media"
# From the distribute answer to the Delta commit on every subscriber: seconds when idle; right
# after `up` the stores still open (5 minutes seen with the machine's load average at 30).
IMPORT_TIMEOUT_S = 600.0
# The worker's --work-dir (deploy/docker-compose.yml): each executor's folder, where a driver's
# shipped jars would be copied.
SPARK_WORKER, SPARK_WORK_DIR = "spark-worker", "/tmp/spark-work"
HTTP_TIMEOUT_S = 120.0


def _blob_settings(ep: Endpoints) -> BlobStoreSettings:
    return BlobStoreSettings(
        backend="s3",
        endpoint_url=ep.s3_endpoint,
        bucket=ep.blob_bucket,
        region=ep.s3_region,
        access_key=ep.s3_access_key,
        secret_key=ep.s3_secret_key,  # type: ignore[arg-type]  # pydantic turns it into SecretStr
    )


def _export_differences(
    spark: Any, ep: Endpoints, sources: dict[str, Path], work: Path
) -> dict[str, list[str]]:
    """Each subscriber's export of every root against its source tree (empty lists: equal)."""
    out: dict[str, list[str]] = {}
    with open_blob_store(_blob_settings(ep)) as blobs:
        for service in SUBSCRIBERS:
            store = DeltaStore(spark, ep.store(service))
            for root, source in sources.items():
                target = work / service / root.strip("/").replace("/", "_")
                shutil.rmtree(target, ignore_errors=True)
                export_tree(store, blobs, root, target)
                # Node /a/b is exported as TARGET/a/b.
                out[f"{service} {root}"] = tree_differences(source, target / root.strip("/"))
    return out


def _commits(ep: Endpoints) -> dict[str, list[checks.Commit]]:
    s3 = checks.s3_client(ep)
    return {s: checks.delta_commits(s3, ep.content_bucket, s) for s in SUBSCRIBERS}


@pytest.mark.timeout(2 * UP_TIMEOUT_S + 900)
def test_cluster_distributes_byte_for_byte_and_keeps_its_data_across_down_up(
    compose: ComposeCluster,
    compose_spark: Any,
    report: Report,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ep = compose.endpoints()
    rng = random.Random(21)
    site, media = tmp_path / "source" / "site", tmp_path / "source" / "media"
    make_deep_tree(site, rng)
    make_spill_tree(media, rng)
    meta = {RUN_KEY: secrets.token_hex(4)}
    http = PublisherClient(ep.publisher_url, ep.token, timeout_s=HTTP_TIMEOUT_S)
    with http:
        refused = httpx.post(
            f"{ep.publisher_url}/distribute",
            json={"action": "ADD", "paths": [SITE]},
            timeout=HTTP_TIMEOUT_S,
        )
        assert refused.status_code == 401, "the published port must require the token"

        started = time.monotonic()
        tree_body = deep_add(site, SITE, meta)
        tree = http.distribute(tree_body)
        spilled = http.distribute(deep_add(media, MEDIA, meta))
        assert not tree["spilled"], tree
        assert spilled["spilled"], f"{spilled['size']} bytes were not spilled"
        last = int(spilled["offset"])
        imported = wait_imported(compose, last, started, IMPORT_TIMEOUT_S)

        sources = {SITE: site, MEDIA: media}
        exported_at = time.monotonic()
        differences = _export_differences(compose_spark, ep, sources, tmp_path / "export")
        export_s = [round(time.monotonic() - exported_at, 1)]
        assert not any(differences.values()), differences
        commits = _commits(ep)
        counts = {s: checks.check_each_offset_once(s, commits[s], last) for s in SUBSCRIBERS}
        # The executors read the image's jars in place: no driver copied its jars to them.
        copied = compose.files(SPARK_WORKER, SPARK_WORK_DIR, "*.jar")
        assert not copied, f"jars copied to the executors: {copied}"

        console = httpx.get(f"{ep.publisher_url}/console", timeout=HTTP_TIMEOUT_S)
        assert console.status_code == 200, console.text[:200]
        assert "text/html" in console.headers["content-type"]
        assert "<html" in console.text.lower()

        # down, then up: the stores, blobs and the log survive; only new packages are imported.
        processed = {s: compose.processed_offset(s) for s in SUBSCRIBERS}
        assert processed == dict.fromkeys(SUBSCRIBERS, last), processed
        changed = site / "s1" / "p2"
        (changed / "index.txt").write_bytes(rng.randbytes(300))
        (changed / "added.bin").write_bytes(rng.randbytes(40_000))
        update_body = deep_add(changed, f"{SITE}/s1/p2", meta)
        down_s = compose.down()
        up_s = compose.up()
        # Distributed the moment `up` returns: every subscriber holds its position by then.
        restarted = time.monotonic()
        update = http.distribute(update_body)
        new = int(update["offset"])
        assert new > last, f"the log restarted: offset {new} after {last}"
        after = wait_imported(compose, new, restarted, IMPORT_TIMEOUT_S)
        exported_at = time.monotonic()
        # The whole site: what was imported before `down` is still there, the update applied.
        differences = _export_differences(compose_spark, ep, {SITE: site}, tmp_path / "after")
        export_s.append(round(time.monotonic() - exported_at, 1))
        assert not any(differences.values()), differences
        commits_after = _commits(ep)
        for service in SUBSCRIBERS:
            checks.check_each_offset_once(service, commits_after[service], new)
            old = commits[service]
            assert commits_after[service][: len(old)] == old, f"{service}: old commits changed"
            later = checks.import_ranges(commits_after[service][len(old) :])
            assert later, f"{service}: no import commit after up"
            assert all(first > last for first, _, _ in later), (
                f"{service} imported old offsets again after up: {later}"
            )

    report.say(
        capsys,
        "cluster_job",
        {
            "deep_tree_nodes": len(tree_body["nodes"]),
            "large_files_by_reference": large_files(site),
            "spilled_package_bytes": spilled.get("size"),
            "imported_s": imported,
            "import_commits": counts,
            "down_s": round(down_s, 1),
            "up_again_s": round(up_s, 1),
            "new_package_imported_s": after,
            "export_s": export_s,
        },
    )
