"""The read API (subscriber/reads/api.py) on a real endpoint over a memory store's read model:
nodes and subtrees, binaries with ETag, 304, ranges and their checks, and hostile readers
(traversal, NUL, a 1 MB path, depth 10^6, ranges past the end, idle connections, slow readers
of a large binary, a wrong token): each gets a clear answer, and /health keeps answering."""

from __future__ import annotations

import contextlib
import hashlib
import io
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from blobstore.local import LocalBlobStore
from journal.content.package import FILE_DATA, FILE_TYPE, NODE_TYPE, Binary, BlobRef, Node
from subscriber.http import Health, HealthServer
from subscriber.reads.api import ReadApi
from subscriber.reads.binaries import STREAM_CHUNK
from subscriber.reads.documents import OFFSET_HEADER
from subscriber.reads.sources import read_model
from subscriber.settings import SubscriberSettings
from subscriber.store.memory import MemoryStore
from tests.subscriber.packages import add, file_node, new_change_set, node
from tests.subscriber.reads import OneModel

TOKEN = "read-secret"
BIG = bytes(range(256)) * 4096 * 4  # 4 MiB
IDLE_CONNECTIONS = 1000
SLOW_READERS = 200


def blob_node(path: str, blobs: LocalBlobStore, data: bytes, recorded: bytes | None = None) -> Node:
    """A file node whose bytes are a blob; ``recorded``: the bytes its reference describes."""
    key = "blobs/" + hashlib.sha256(data).hexdigest()
    blobs.put(key, io.BytesIO(data), len(data))
    described = data if recorded is None else recorded
    n = file_node(path, b"")
    ref = BlobRef(key=key, size=len(described), sha256=hashlib.sha256(described).hexdigest())
    n.properties[FILE_DATA].binary_value.CopyFrom(Binary(ref=ref, content_type="image/png"))
    return n


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, MemoryStore]]:
    blobs = LocalBlobStore(tmp_path / "blobs")
    store = MemoryStore()
    store.open()
    site = [
        node("/site", title="Site"),
        file_node("/site/page.html", b"<h1>hello</h1>"),
        blob_node("/site/big.bin", blobs, BIG),
        blob_node("/site/bad.bin", blobs, b"tampered", recorded=b"original"),
        blob_node("/site/badbig.bin", blobs, BIG[:-1] + b"x", recorded=BIG),
        *(node(f"/site/d{i}", n=i) for i in range(3)),
        node("/site/d0/deep"),
        node("/site/gone/orphan"),  # its parent was never distributed
    ]
    site[1].properties[NODE_TYPE].string_value = FILE_TYPE
    store.commit(new_change_set([add(7, "/site", *site)]))
    model = read_model(SubscriberSettings(agent_name="solo"), store, tmp_path, lambda: None)
    assert model is not None
    model.start()
    assert model.wait_version(store.shared.version, 10)
    api = ReadApi(OneModel(model), blobs, TOKEN)
    health = Health(agent="solo", instance_id="i", processed_offset=7, state="IDLE")
    server = HealthServer(lambda: health, lambda: (True, "ok"), lambda: b"", reads=api)
    server.start()
    try:
        yield server.url, store
    finally:
        server.stop()
        api.close()
        model.stop()


def get(url: str, path: str, token: str | None = TOKEN, **headers: str) -> httpx.Response:
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.get(url + path, headers=headers, timeout=10)


def request(target: str) -> bytes:
    return f"GET {target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode()


def raw_status(url: str, target: str) -> int:
    """The status of a GET of ``target`` sent as it is (clients refuse such URLs)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        with contextlib.suppress(OSError):  # closed by the server before the request was whole
            conn.sendall(request(target))
        status = conn.recv(64).split(b" ")[1]
    return int(status)


def test_a_subtree_page_by_page_in_path_order(served: tuple[str, MemoryStore]) -> None:
    url, store = served
    expected = sorted(n.path for n in store.nodes("/site"))
    assert "/site/gone/orphan" in expected
    assert "/site/gone" not in expected
    seen: list[str] = []
    after: str | None = None
    pages = 0
    while True:
        answer = get(url, "/tree/site?limit=3" + (f"&after={after}" if after else ""))
        assert answer.status_code == 200, answer.text
        assert answer.headers[OFFSET_HEADER] == "7"
        page = answer.json()
        assert len(page["nodes"]) <= 3
        assert all("children" not in doc for doc in page["nodes"])
        seen.extend(doc["path"] for doc in page["nodes"])
        pages += 1
        after = page["next"]
        if after is None:
            break
    assert seen == expected
    assert pages == len(expected) // 3 + 1
    whole = get(url, "/tree/").json()
    assert [d["path"] for d in whole["nodes"]] == expected
    assert whole["next"] is None
    page = get(url, "/tree/site/page.html").json()
    assert page["nodes"][0]["properties"][NODE_TYPE] == FILE_TYPE


def test_a_shallow_tree_page_is_the_node_and_its_children(
    served: tuple[str, MemoryStore],
) -> None:
    url, _ = served
    shallow = get(url, "/tree/site?shallow=true").json()
    names = [d["path"].removeprefix("/site") for d in shallow["nodes"]]
    assert names == ["", *(f"/{c}" for c in get(url, "/content/site").json()["children"])]
    # A path whose node never existed still lists what lies below it.
    assert [d["path"] for d in get(url, "/tree/site/gone").json()["nodes"]] == ["/site/gone/orphan"]
    assert get(url, "/tree/nowhere").json() == {"path": "/nowhere", "nodes": [], "next": None}


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=1001", "limit=-1", "limit=x", "after=%00", "after=a/../b"]
)
def test_a_bad_tree_page_is_refused(served: tuple[str, MemoryStore], query: str) -> None:
    url, _ = served
    answer = get(url, f"/tree/site?{query}")
    assert answer.status_code == 400, answer.text
    assert "bad tree page" in answer.json()["error"]
    assert get(url, "/tree/site", token=None).status_code == 401


def test_a_node_its_subtree_and_head(served: tuple[str, MemoryStore]) -> None:
    url, _ = served
    answer = get(url, "/content/site")
    assert answer.status_code == 200
    assert answer.headers[OFFSET_HEADER] == "7"
    doc = answer.json()
    assert doc["properties"]["title"] == "Site"
    assert doc["children"] == ["bad.bin", "badbig.bin", "big.bin", "d0", "d1", "d2", "page.html"]
    assert doc["offset"] == 7
    assert "nodes" not in doc
    deep = get(url, "/content/site?depth=2").json()
    assert deep["nodes"]["d0"]["nodes"]["deep"]["path"] == "/site/d0/deep"
    assert deep["complete"] is True
    big = deep["nodes"]["big.bin"]["properties"][FILE_DATA]
    assert big["size"] == len(BIG)
    assert big["sha256"] == hashlib.sha256(BIG).hexdigest()
    assert get(url, big["url"]).content == BIG
    head = httpx.head(url + "/content/site", headers={"Authorization": f"Bearer {TOKEN}"})
    assert head.status_code == 200
    assert head.content == b""
    assert get(url, "/agents/solo/content/site").json()["path"] == "/site"


def test_missing_and_refused_paths(served: tuple[str, MemoryStore]) -> None:
    url, _ = served
    missing = get(url, "/content/site/nothing")
    assert missing.status_code == 404
    assert "never distributed" in missing.json()["error"]
    assert missing.headers[OFFSET_HEADER] == "7"
    for hostile in ("/content/site/%2e%2e/etc", "/content/site/a%00b", "/content/site//x"):
        refused = get(url, hostile)
        assert refused.status_code == 400, hostile
        assert "content rules" in refused.json()["error"]
    assert raw_status(url, "/content/" + "a" * 1_000_000) in (400, 414, 431)
    assert raw_status(url, "/content/" + "a/" * 600) == 400  # within HTTP's limits: the rules
    for depth in ("1000000", "-1", "x", "9"):
        assert get(url, f"/content/site?depth={depth}").status_code == 400
    assert get(url, "/agents/other/content/site").status_code == 404
    assert get(url, "/content/site", token=None).status_code == 401
    assert get(url, "/content/site", token="wrong").status_code == 401


def test_binary_etag_ranges_and_checks(served: tuple[str, MemoryStore]) -> None:
    url, _ = served
    page = get(url, "/binaries/site/page.html")
    assert page.content == b"<h1>hello</h1>"
    etag = page.headers["ETag"]
    assert etag == f'"{hashlib.sha256(b"<h1>hello</h1>").hexdigest()}"'
    assert get(url, "/binaries/site/page.html", **{"If-None-Match": etag}).status_code == 304
    part = get(url, "/binaries/site/big.bin", Range="bytes=100-199")
    assert part.status_code == 206
    assert part.content == BIG[100:200]
    assert part.headers["Content-Range"] == f"bytes 100-199/{len(BIG)}"
    assert get(url, "/binaries/site/big.bin", Range="bytes=-10").content == BIG[-10:]
    past = get(url, "/binaries/site/big.bin", Range=f"bytes={len(BIG)}-")
    assert past.status_code == 416
    assert past.headers["Content-Range"] == f"bytes */{len(BIG)}"
    bad = get(url, "/binaries/site/bad.bin")
    assert bad.status_code == 502
    assert "mismatch" in bad.json()["error"]
    with pytest.raises(httpx.HTTPError):  # cut off: never a whole answer
        get(url, "/binaries/site/badbig.bin")
    assert get(url, "/binaries/site?property=jcr:data").status_code == 404
    assert get(url, "/binaries/site/page.html?property=a/b").status_code == 400


def test_idle_connections_and_slow_readers_leave_health_answering(
    served: tuple[str, MemoryStore],
) -> None:
    url, store = served
    host, port = url.removeprefix("http://").split(":")
    idle = [socket.create_connection((host, int(port))) for _ in range(IDLE_CONNECTIONS)]
    slow = []
    for _ in range(SLOW_READERS):  # ask for the large binary and read nothing of it
        s = socket.create_connection((host, int(port)))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(request("/binaries/site/big.bin"))
        slow.append(s)
    try:
        time.sleep(0.5)
        started = time.monotonic()
        assert httpx.get(url + "/health", timeout=5).status_code == 200
        assert get(url, "/content/site").status_code == 200
        assert time.monotonic() - started < 2
        store.commit(new_change_set([add(8, "/site/new", node("/site/new"))]))  # imports go on
        slow[0].settimeout(5)
        assert len(slow[0].recv(STREAM_CHUNK)) > 0
    finally:
        for s in idle + slow:
            s.close()
