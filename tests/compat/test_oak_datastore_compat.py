"""Oak 1.82.0 itself writes binaries and hands out their references; scd resolves those
references, as a FileVault package's {BinaryRef}, to the same bytes, checks their HMAC with the
data store's own reference.key and refuses a tampered one. Two of Oak's levels: its data store
(oak-blob-plugins: OakFileDataStore behind DataStoreBlobStore), and a whole repository (oak-jcr
on oak-segment-tar with that data store, as an author runs it), whose JCR binaries answer
ReferenceBinary.getReference(), the call FileVault's exporter makes. Oak's side: tests/compat/oak
(OakDataStoreCompat.java, OakRepositoryCompat.java; built once by tests/compat/build.sh)."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from blobstore.local import LocalBlobStore
from blobstore.oak import OakDataStore, OakDataStoreSettings, file_path, parse_reference
from journal.content.filevault import decode_filevault, encode_filevault
from journal.content.filevault.layout import FOREIGN_REF_KEY
from journal.content.package import ContentPackage
from journal.wire.journal_pb2 import ReqType
from subscriber.bookkeeper.oak_refs import resolve_references
from subscriber.errors import BadBinaryReference
from tests.compat.jvm import build_classpath, needs_jvm

HERE = Path(__file__).parent
# Up to Oak's minimum record length (4096 bytes) a binary is inlined in its blob id, has no
# reference, and FileVault puts its bytes in the package; above it is a data store record.
SIZES = [10, 4096, 4097, 70_000, 3 * 1024 * 1024 + 7]

pytestmark = needs_jvm("Oak's")


# A segment store keeps a binary below 16512 bytes in its segments: only larger ones reach the
# data store and have a reference.
REPOSITORY_SIZES = [10, 16_511, 16_512, 70_000, 3 * 1024 * 1024 + 7]


@pytest.fixture(scope="module")
def classpath() -> str:
    return build_classpath(["bash", str(HERE / "build.sh"), str(HERE / "oak")])


def _run(classpath: str, main: str, directory: Path, sizes: list[int]) -> dict[str, Any]:
    done = subprocess.run(
        ["java", "-cp", classpath, f"io.scd.compat.{main}", str(directory)]
        + [str(size) for size in sizes],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


@pytest.fixture(scope="module")
def written(
    classpath: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("oak") / "datastore"
    return root, _run(classpath, "OakDataStoreCompat", root, SIZES)


def _store(root: Path, monkeypatch: pytest.MonkeyPatch) -> OakDataStore:
    """The data store as an operator configures it: the FileDataStore's directory and its own
    reference.key."""
    monkeypatch.setenv("SCD_OAK_LAYOUT", "file")
    monkeypatch.setenv("SCD_OAK_FILE_ROOT", str(root))
    monkeypatch.setenv("SCD_OAK_REFERENCE_KEY_FILE", str(root / "reference.key"))
    store = OakDataStore.from_settings(OakDataStoreSettings())
    assert store is not None
    return store


def _filevault_package(references: list[str]) -> ContentPackage:
    """A FileVault package naming each reference as {BinaryRef}, read back as scd reads it."""
    package = ContentPackage(package_id="oak", req_type=ReqType.ADD, created_ms=1)
    package.roots.add(path="/content/dam", deep=True)
    package.nodes.add(path="/content/dam")
    for i, reference in enumerate(references):
        node = package.nodes.add(path=f"/content/dam/f{i}.bin")
        node.properties["jcr:primaryType"].string_value = "nt:file"
        node.properties["jcr:data"].binary_value.ref.key = FOREIGN_REF_KEY + reference
    data = encode_filevault(package)
    return decode_filevault(data, package_id="oak", req_type=ReqType.ADD).package


def test_oak_inlines_small_binaries_and_references_the_others(
    written: tuple[Path, dict[str, Any]],
) -> None:
    root, out = written
    assert out["minRecordLength"] == 4096
    by_size = {b["size"]: b for b in out["binaries"]}
    assert by_size[10]["reference"] is None
    assert by_size[4096]["reference"] is None
    records = [b for b in out["binaries"] if b["reference"] is not None]
    assert [b["size"] for b in records] == SIZES[2:]
    for b in records:
        # Oak's identifier is the SHA-256 of the bytes; the blob id adds '#<length>', the
        # reference ':<hmac>'; both the blob store's and the record's reference agree.
        assert b["identifier"] == b["sha256"]
        assert b["blobId"] == f"{b['sha256']}#{b['size']}"
        assert b["reference"] == b["recordReference"]
        assert parse_reference(b["reference"]).identifier == b["sha256"]
        assert b["resolvesBack"] == b["blobId"]
        assert file_path(root, b["identifier"]).relative_to(root).as_posix() in out["files"]
    assert "reference.key" in out["files"]
    assert len(out["files"]) == len(records) + 1


def test_scd_resolves_oak_references_to_the_same_bytes(
    written: tuple[Path, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, out = written
    records = [b for b in out["binaries"] if b["reference"] is not None]
    package = _filevault_package([b["reference"] for b in records])
    blobs = LocalBlobStore(tmp_path / "scd-blobs")
    assert resolve_references(package, _store(root, monkeypatch), blobs) == len(records)
    for b, node in zip(records, package.nodes[1:], strict=True):
        ref = node.properties["jcr:data"].binary_value.ref
        assert (ref.size, ref.sha256) == (b["size"], b["sha256"])
        with blobs.get(ref.key) as stream:
            assert hashlib.sha256(stream.read()).hexdigest() == b["sha256"]


def test_scd_refuses_a_tampered_oak_reference(
    written: tuple[Path, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, out = written
    store = _store(root, monkeypatch)
    blobs = LocalBlobStore(tmp_path / "scd-blobs")
    one, other = [b for b in out["binaries"] if b["reference"] is not None][:2]
    identifier, mac = one["reference"].split(":")
    flipped = mac[:-1] + ("0" if mac[-1] != "0" else "1")
    for tampered in (
        f"{identifier}:{flipped}",
        f"{identifier}:{other['reference'].split(':')[1]}",  # another record's HMAC
        f"{other['identifier']}:{mac}",
    ):
        with pytest.raises(BadBinaryReference, match="HMAC does not match"):
            resolve_references(_filevault_package([tampered]), store, blobs)
    assert list(blobs.list()) == []


def test_scd_resolves_the_references_of_an_oak_repositorys_binaries(
    classpath: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _run(classpath, "OakRepositoryCompat", tmp_path / "author", REPOSITORY_SIZES)
    by_size = {b["size"]: b for b in out["binaries"]}
    assert by_size[10]["reference"] is None
    assert by_size[16_511]["reference"] is None
    records = [b for b in out["binaries"] if b["reference"] is not None]
    assert [b["size"] for b in records] == REPOSITORY_SIZES[2:]
    package = _filevault_package([b["reference"] for b in records])
    blobs = LocalBlobStore(tmp_path / "scd-blobs")
    store = _store(tmp_path / "author" / "datastore", monkeypatch)
    assert resolve_references(package, store, blobs) == len(records)
    for b, node in zip(records, package.nodes[1:], strict=True):
        ref = node.properties["jcr:data"].binary_value.ref
        assert (ref.size, ref.sha256) == (b["size"], b["sha256"])
        with blobs.get(ref.key) as stream:
            assert hashlib.sha256(stream.read()).hexdigest() == b["sha256"]
    identifier, mac = records[0]["reference"].split(":")
    with pytest.raises(BadBinaryReference, match="HMAC does not match"):
        resolve_references(_filevault_package([f"{identifier}:{mac[::-1]}"]), store, blobs)
