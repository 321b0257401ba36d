"""A FileVault package's {BinaryRef} Oak data store references, resolved when the subscriber
reads the package (subscriber.bookkeeper.oak_refs, blobstore.oak): a FileDataStore record
is copied into scd's blob store by its content key, an S3DataStore record is referenced in
place; a malformed, traversing, huge or wrongly signed reference fails the package for good,
a record not there yet fails it for now (retried), as a package blob not replicated yet."""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
from pathlib import Path

import pytest
from pydantic import ValidationError

from blobstore.content_addressed import content_key
from blobstore.errors import ForgedReference, MalformedReference
from blobstore.local import LocalBlobStore
from blobstore.oak import (
    MAX_REFERENCE_CHARS,
    OakDataStore,
    OakDataStoreSettings,
    file_path,
    parse_reference,
    s3_key,
)
from journal.api import Record
from journal.content.filevault import FILEVAULT_PACKAGE_TYPE, decode_filevault, encode_filevault
from journal.content.filevault.layout import FOREIGN_REF_KEY
from journal.content.package import ContentPackage
from journal.content.rules import DEFAULT_LIMITS
from journal.wire import messages as m
from runtime.errors import ConfigError, PermanentError
from subscriber.agent import SubscriberAgent
from subscriber.bookkeeper.decoding import RecordDecoder
from subscriber.bookkeeper.oak_refs import resolve_references
from subscriber.content import open_binary
from subscriber.errors import BadBinaryReference, CorruptPackage, PackageUnavailable
from subscriber.store.memory import MemoryStore
from tests.subscriber import harness as h
from tests.subscriber.harness import Env

KEY = bytes(range(256))  # a FileDataStore's reference.key holds 256 bytes
DATA = b"\x00binary above Oak's inline size " * 200


def mac(identifier: str, key: bytes = KEY) -> str:
    return hmac.new(key, identifier.encode(), hashlib.sha1).hexdigest()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_record(root: Path, data: bytes) -> str:
    """``data`` as a FileDataStore record under ``root``; its reference."""
    identifier = sha256(data)
    path = root / identifier[:2] / identifier[2:4] / identifier[4:6] / identifier
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return f"{identifier}:{mac(identifier)}"


def with_reference(reference: str, package_id: str = "fv") -> ContentPackage:
    package = ContentPackage(package_id=package_id, req_type=m.ReqType.ADD)
    package.roots.add(path="/content", deep=True)
    package.nodes.add(path="/content")
    node = package.nodes.add(path="/content/big.bin")
    node.properties["jcr:primaryType"].string_value = "nt:file"
    ref = node.properties["jcr:data"].binary_value.ref
    ref.key = FOREIGN_REF_KEY + reference
    ref.content_type = "application/octet-stream"
    return package


@pytest.fixture
def blobs(tmp_path: Path) -> LocalBlobStore:
    return LocalBlobStore(tmp_path / "scd-blobs")


@pytest.fixture
def fds(tmp_path: Path) -> Path:
    root = tmp_path / "datastore"
    root.mkdir()
    return root


def file_store(root: Path, key: bytes | None = KEY) -> OakDataStore:
    return OakDataStore("file", key, file_root=root)


# ----------------------------------------------------------------------------- resolving
def test_a_filedatastore_record_is_copied_to_its_content_key(
    fds: Path, blobs: LocalBlobStore
) -> None:
    package = with_reference(write_record(fds, DATA))
    assert resolve_references(package, file_store(fds), blobs) == 1
    ref = package.nodes[1].properties["jcr:data"].binary_value.ref
    assert (ref.key, ref.size, ref.sha256) == (content_key(sha256(DATA)), len(DATA), sha256(DATA))
    assert ref.content_type == "application/octet-stream"
    with blobs.get(ref.key) as stream:
        assert stream.read() == DATA
    # Once copied, the next package referring to it copies nothing (the record may be gone).
    file_path(fds, sha256(DATA)).unlink()
    again = with_reference(f"{sha256(DATA)}:{mac(sha256(DATA))}")
    resolve_references(again, file_store(fds), blobs)
    assert again.nodes[1].properties["jcr:data"].binary_value.ref.key == ref.key


def test_through_the_decoder_a_filevault_package_resolves_and_fails_as_it_should(
    fds: Path, blobs: LocalBlobStore
) -> None:
    good = write_record(fds, DATA)
    decoder = RecordDecoder("t.package", ["publish"], blobs, DEFAULT_LIMITS, None, file_store(fds))

    def decode(reference: str) -> tuple[ContentPackage | None, Exception | None, bool]:
        data = encode_filevault(with_reference(reference))
        read = decode_filevault(data, package_id="fv-1", req_type=m.ReqType.ADD).package
        (node,) = [n for n in read.nodes if n.path == "/content/big.bin"]
        assert node.properties["jcr:data"].binary_value.ref.key == FOREIGN_REF_KEY + reference
        value, headers = m.encode(
            m.PackageMessage(
                pub_sling_id="pub",
                pub_agent_name="publish",
                pkg_id="fv-1",
                req_type=m.ReqType.ADD,
                pkg_type=FILEVAULT_PACKAGE_TYPE,
                pkg_length=len(data),
                pkg_binary=data,
            )
        )
        out = decoder.decode(Record("t.package", 0, 7, 0, None, headers, value))
        return out.package, out.error, out.permanent

    package, error, _ = decode(good)
    assert error is None
    assert package is not None
    ref = next(n for n in package.nodes if n.path == "/content/big.bin").properties["jcr:data"]
    assert ref.binary_value.ref.key == content_key(sha256(DATA))

    identifier = sha256(b"not written yet")
    _, error, permanent = decode(f"{identifier}:{mac(identifier)}")
    assert isinstance(error, PackageUnavailable)
    assert error.retriable
    assert not permanent
    assert "not found" in str(error)
    assert "not be replicated yet" in str(error)

    _, error, permanent = decode(good[:-1] + ("0" if good[-1] != "0" else "1"))
    assert isinstance(error, BadBinaryReference)
    assert permanent
    assert "HMAC does not match" in str(error)
    assert "package fv-1: node '/content/big.bin' property 'jcr:data'" in str(error)


def test_a_record_that_appears_later_resolves_on_the_retry(
    fds: Path, blobs: LocalBlobStore
) -> None:
    identifier = sha256(DATA)
    reference = f"{identifier}:{mac(identifier)}"
    with pytest.raises(PackageUnavailable):
        resolve_references(with_reference(reference), file_store(fds), blobs)
    write_record(fds, DATA)
    resolve_references(with_reference(reference), file_store(fds), blobs)


def test_a_damaged_record_is_refused_and_not_stored(fds: Path, blobs: LocalBlobStore) -> None:
    reference = write_record(fds, DATA)
    file_path(fds, sha256(DATA)).write_bytes(DATA + b"x")
    with pytest.raises(CorruptPackage, match="the data store is damaged"):
        resolve_references(with_reference(reference), file_store(fds), blobs)
    assert not blobs.exists(content_key(sha256(DATA)))


def test_a_sha1_store_record_is_checked_by_sha1_and_stored_by_sha256(
    fds: Path, blobs: LocalBlobStore
) -> None:
    identifier = hashlib.sha1(DATA).hexdigest()
    path = file_path(fds, identifier)
    path.parent.mkdir(parents=True)
    path.write_bytes(DATA)
    package = with_reference(f"{identifier}:{mac(identifier)}")
    resolve_references(package, file_store(fds), blobs)
    assert package.nodes[1].properties["jcr:data"].binary_value.ref.sha256 == sha256(DATA)


def test_an_s3datastore_record_is_referenced_in_place(blobs: LocalBlobStore) -> None:
    identifier = sha256(DATA)
    blobs.put_bytes(s3_key("oak/", identifier), DATA)
    package = with_reference(f"{identifier}:{mac(identifier)}")
    resolve_references(package, OakDataStore("s3", KEY, s3_prefix="oak/"), blobs)
    ref = package.nodes[1].properties["jcr:data"].binary_value.ref
    assert (ref.key, ref.size, ref.sha256) == (
        f"oak/{identifier[:4]}-{identifier[4:]}",
        len(DATA),
        identifier,
    )
    missing = sha256(b"other")
    with pytest.raises(PackageUnavailable):
        resolve_references(
            with_reference(f"{missing}:{mac(missing)}"), OakDataStore("s3", KEY), blobs
        )


def test_without_a_key_the_hmac_is_not_checked_but_its_form_is(
    fds: Path, blobs: LocalBlobStore
) -> None:
    identifier = sha256(DATA)
    write_record(fds, DATA)
    resolve_references(with_reference(f"{identifier}:{'0' * 40}"), file_store(fds, None), blobs)
    with pytest.raises(BadBinaryReference):
        resolve_references(with_reference(f"{identifier}:zz"), file_store(fds, None), blobs)


def test_without_a_blob_store_a_reference_waits(fds: Path) -> None:
    with pytest.raises(PackageUnavailable, match="no blob store configured"):
        resolve_references(with_reference(write_record(fds, DATA)), file_store(fds), None)


# ----------------------------------------------------------------------------- hostile text
_ID = sha256(DATA)
HOSTILE = [
    "",
    ":",
    _ID,  # no HMAC
    f"{_ID}:",
    f":{mac(_ID)}",
    f"{_ID}:{mac(_ID)}:extra",
    f"{_ID.upper()}:{mac(_ID)}",
    f"{_ID}:{mac(_ID).upper()}",
    f"{_ID[:-1]}:{mac(_ID)}",  # 63 digits
    f"{_ID}#5000:{mac(_ID)}",  # a blob id's length suffix is no part of a reference
    f"../../../../etc/passwd:{mac('../../../../etc/passwd')}",
    f"../{_ID[3:]}:{mac(_ID)}",
    f"/{_ID[1:]}:{mac(_ID)}",
    f"ab/cd/ef/{_ID[9:]}:{mac(_ID)}",
    f"{_ID[:10]}\x00{_ID[11:]}:{mac(_ID)}",
    f"{_ID[:10]}\n{_ID[11:]}:{mac(_ID)}",
    f"{'é' * 64}:{mac(_ID)}",
    f"{'a' * 10_000_000}:{mac(_ID)}",  # huge
    "a" * (MAX_REFERENCE_CHARS + 1),
    f"{'0' * 128}{'0' * 64}:{mac(_ID)}",
    f"{_ID}:{mac(_ID)}0",
    f"{_ID}: {mac(_ID)}",
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_a_hostile_reference_is_malformed_and_names_nothing(
    text: str, fds: Path, blobs: LocalBlobStore
) -> None:
    with pytest.raises(MalformedReference) as raised:
        parse_reference(text)
    assert isinstance(raised.value, PermanentError)
    assert len(str(raised.value)) < 400  # a huge reference is not echoed
    with pytest.raises(BadBinaryReference, match=r"package fv: node '/content/big\.bin'"):
        resolve_references(with_reference(text), file_store(fds), blobs)
    assert list(blobs.list()) == []


def test_a_wrong_hmac_is_forged() -> None:
    store = file_store(Path("/nonexistent"))
    assert store.reference(f"{_ID}:{mac(_ID)}").identifier == _ID
    for wrong in (mac(_ID, b"another data store's key!"), mac(sha256(b"x")), "0" * 40):
        with pytest.raises(ForgedReference, match="HMAC does not match"):
            store.reference(f"{_ID}:{wrong}")


def test_the_identifier_names_a_file_inside_the_store_only() -> None:
    assert file_path(Path("/ds"), _ID) == Path(f"/ds/{_ID[:2]}/{_ID[2:4]}/{_ID[4:6]}/{_ID}")
    assert s3_key("", _ID) == f"{_ID[:4]}-{_ID[4:]}"


# ----------------------------------------------------------------------------- settings
def test_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCD_OAK_LAYOUT", "file")
    with pytest.raises(ValidationError, match="SCD_OAK_FILE_ROOT"):
        OakDataStoreSettings()
    monkeypatch.setenv("SCD_OAK_FILE_ROOT", str(tmp_path))
    monkeypatch.setenv("SCD_OAK_REFERENCE_KEY", base64.b64encode(KEY).decode())
    store = OakDataStore.from_settings(OakDataStoreSettings())
    assert store is not None
    assert store.key == KEY
    assert store.file_root == tmp_path
    monkeypatch.setenv("SCD_OAK_REFERENCE_KEY", "not base64!")
    with pytest.raises(ValidationError, match="not base64"):
        OakDataStoreSettings()
    monkeypatch.setenv("SCD_OAK_REFERENCE_KEY", base64.b64encode(b"short").decode())
    with pytest.raises(ValidationError, match="5 bytes"):
        OakDataStoreSettings()
    monkeypatch.delenv("SCD_OAK_REFERENCE_KEY")
    (tmp_path / "reference.key").write_bytes(KEY)
    monkeypatch.setenv("SCD_OAK_REFERENCE_KEY_FILE", str(tmp_path / "reference.key"))
    store = OakDataStore.from_settings(OakDataStoreSettings())
    assert store is not None
    assert store.key == KEY
    monkeypatch.setenv("SCD_OAK_REFERENCE_KEY_FILE", str(tmp_path / "missing.key"))
    with pytest.raises(ConfigError, match="SCD_OAK_REFERENCE_KEY_FILE"):
        OakDataStore.from_settings(OakDataStoreSettings())
    monkeypatch.setenv("SCD_OAK_LAYOUT", "none")
    assert OakDataStore.from_settings(OakDataStoreSettings()) is None


# ----------------------------------------------------------------------------- a subscriber
def test_a_subscriber_waits_for_the_record_then_imports_and_serves_it(
    local_env: Env, fds: Path
) -> None:
    """End to end on the embedded journal: the package retries while the FileDataStore lacks
    the record, imports once it is there, and the binary reads back as Oak's bytes; a package
    with a forged reference after it fails for good without holding up the next one."""
    env = local_env
    identifier = sha256(DATA)
    send_filevault(env, "fv-wait", f"{identifier}:{mac(identifier)}")
    forged = send_filevault(env, "fv-forged", f"{identifier}:{mac(identifier, b'x' * 32)}")
    store = MemoryStore()
    settings = h.subscriber_settings(env.js, env.bs, env.tmp / "store")
    agent = SubscriberAgent(settings, env.journal, store, env.blobs, oak=file_store(fds))
    agent.open()
    # The retry loop runs inside run_once: the record appears while the package waits.
    appears = threading.Timer(0.5, write_record, (fds, DATA))
    appears.start()
    try:
        h.drive(agent, lambda: agent.processed_offset >= forged, timeout_s=30)
    finally:
        appears.cancel()
    assert agent.loop.retries.failed_attempts >= 1
    assert agent.counters.permanent_failures == 1
    with open_binary(store, env.blobs, "/content/big.bin") as stream:
        assert stream.read() == DATA
    stored = store.node("/content/big.bin")
    assert stored is not None
    assert stored.pkg_id == "fv-wait"


def send_filevault(env: Env, package_id: str, reference: str) -> int:
    data = encode_filevault(with_reference(reference, package_id))
    value, headers = m.encode(
        m.PackageMessage(
            pub_sling_id="pub-1",
            pub_agent_name=h.PUB,
            pkg_id=package_id,
            req_type=m.ReqType.ADD,
            pkg_type=FILEVAULT_PACKAGE_TYPE,
            pkg_length=len(data),
            pkg_binary=data,
        )
    )
    return env.journal.send(env.js.topics.package, value, headers=headers)
