"""The compose cluster serves what it distributes. A page and two binaries (one inline, one in
the blob store) distributed through a publisher replica are read back from every subscriber's
read API on the ports that ``deploy/compose.sh env`` names, byte for byte; and with
``scd content`` run on this machine with nothing but that env: subscriber-1's store on S3 read
without a JVM, and subscriber-3 through its read API (``--url``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from typing import Any

import httpx
import pytest

from publisher.client import PublisherClient
from tests.containers.compose import ComposeCluster, parse_env
from tests.containers.conftest import Report
from tests.containers.driving import wait_imported
from tests.containers.site import BINARY_THRESHOLD_BYTES

pytestmark = [pytest.mark.containers, pytest.mark.slow]

HTTP_TIMEOUT_S = 30.0
IMPORT_TIMEOUT_S = 600.0
SERVED_TIMEOUT_S = 60.0
COMMAND_TIMEOUT_S = 120.0


def _scd(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "scd.cli", "content", *args],
        env=env,
        capture_output=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


def _file(path: str, data: bytes) -> dict[str, Any]:
    return {
        "path": path,
        "properties": {
            "jcr:primaryType": "nt:file",
            "jcr:data": {
                "type": "binary",
                "base64": base64.b64encode(data).decode(),
                "contentType": "image/png",
            },
        },
    }


@pytest.mark.timeout(IMPORT_TIMEOUT_S + 300)
def test_every_subscriber_serves_what_was_distributed(
    compose: ComposeCluster, report: Report, capsys: pytest.CaptureFixture[str]
) -> None:
    values = parse_env(compose.script("env"))
    subscriber_urls = values["SCD_COMPOSE_SUBSCRIBER_URLS"].split()
    ep = compose.endpoints()
    root = f"/served-{uuid.uuid4().hex[:8]}"
    small = os.urandom(1000)
    large = os.urandom(BINARY_THRESHOLD_BYTES * 8)  # above the threshold: a blob reference
    body = {
        "action": "ADD",
        "deepPaths": [root],
        "nodes": [
            {"path": root, "properties": {"title": "Served", "rank": 3}},
            _file(f"{root}/small.png", small),
            _file(f"{root}/large.png", large),
        ],
    }
    with PublisherClient(ep.publisher_url, ep.token, timeout_s=HTTP_TIMEOUT_S) as api:
        offset = int(api.distribute(body)["offset"])
    distributed = time.monotonic()
    imported = wait_imported(compose, offset, distributed, IMPORT_TIMEOUT_S)

    served: dict[str, float] = {}
    for url in subscriber_urls:
        with httpx.Client(base_url=url, timeout=HTTP_TIMEOUT_S) as http:
            deadline = time.monotonic() + SERVED_TIMEOUT_S
            page = http.get(f"/content{root}")
            while page.status_code != 200 and time.monotonic() < deadline:
                time.sleep(0.2)
                page = http.get(f"/content{root}")
            served[url] = round(time.monotonic() - distributed, 1)
            assert page.status_code == 200, f"{url}: {page.status_code} {page.text[:300]}"
            assert int(page.headers["X-Scd-Offset"]) >= offset
            doc = page.json()
            assert doc["properties"]["title"] == "Served"
            assert doc["properties"]["rank"] == 3
            assert doc["children"] == ["large.png", "small.png"]
            for name, data in (("small.png", small), ("large.png", large)):
                described = http.get(f"/content{root}/{name}").json()["properties"]["jcr:data"]
                assert described["sha256"] == hashlib.sha256(data).hexdigest()
                assert described["size"] == len(data)
                got = http.get(described["url"])
                assert got.status_code == 200, f"{url}{described['url']}: {got.text[:300]}"
                assert got.content == data
                assert got.headers["content-type"] == "image/png"
                again = http.get(described["url"], headers={"If-None-Match": got.headers["etag"]})
                assert again.status_code == 304
            gone = http.get(f"/content{root}/nothing-here")
            assert gone.status_code == 404
            assert "error" in gone.json()

    # `scd content` from this machine, with the env the compose script prints and nothing else.
    client_env = {k: v for k, v in os.environ.items() if not k.startswith("SCD_")} | values
    listing = _scd(client_env, "ls", root, "--json")
    assert listing.returncode == 0, listing.stderr.decode()[-2000:]
    on_store = {e["path"]: e for e in json.loads(listing.stdout)}
    assert sorted(on_store) == [root, f"{root}/large.png", f"{root}/small.png"]
    assert on_store[f"{root}/large.png"]["binary_bytes"] == len(large)
    cat = _scd(client_env, "cat", f"{root}/large.png")
    assert cat.returncode == 0, cat.stderr.decode()[-2000:]
    assert cat.stdout == large
    through = _scd(client_env, "--url", subscriber_urls[-1], "ls", root, "--json")
    assert through.returncode == 0, through.stderr.decode()[-2000:]
    assert json.loads(through.stdout) == json.loads(listing.stdout)
    cat_api = _scd(client_env, "--url", subscriber_urls[-1], "cat", f"{root}/small.png")
    assert (cat_api.returncode, cat_api.stdout) == (0, small), cat_api.stderr.decode()[-2000:]

    report.add("reads", {"imported_s": imported, "served_s": served})
    with capsys.disabled():
        print(
            f"\n[containers] distributed {root} at offset {offset}: imported after {imported} "
            f"s, served (page and both binaries checked) after {served} s; scd content ls/cat "
            "matched on subscriber-1's store and through subscriber-3's read API"
        )
