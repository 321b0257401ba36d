"""Hostile bytes against the pure-Python decoding layers, many examples each, no threads:

* ``journal.wire.messages.decode`` and ``journal.content.package.decode_package`` give a message or
  a DecodeError, nothing else;
* the subscriber's way from a package record to the changes of its store (``read_package``,
  ``ChangeSet.add``) fails only with scd errors that say whether a retry helps, and a record
  that can never be imported is never called retriable (a max_retries -1 subscriber would
  block on it forever);
* every package the content rules accept becomes store rows (``node_row``), so no package the
  publisher sends fails in the subscriber's Delta commit.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from blobstore.local import LocalBlobStore
from journal.api import Record
from journal.content.package import ContentPackage, decode_package
from journal.content.rules import DEFAULT_LIMITS, check_package
from journal.wire import messages as m
from runtime.errors import DecodeError, PermanentError, ScdError
from subscriber.bookkeeper.decoding import RecordDecoder
from subscriber.store.changes import ChangeSet, Unit
from subscriber.store.rows import node_row
from tests.fuzz import records as r

AGENTS = ["publish", "other"]
# Examples per property: the decoders take microseconds, so a few hundred cost a second or two.
EXAMPLES = 400

fuzz_settings = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def blobs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBlobStore]:
    """An empty blob store: every reference a record makes points at nothing."""
    store = LocalBlobStore(tmp_path_factory.mktemp("fuzz-blobs"))
    yield store
    store.close()


@fuzz_settings
@given(record=r.garbage(AGENTS))
def test_decode_gives_the_named_message_or_a_decode_error(record: r.Garbage) -> None:
    note(repr(record))
    headers = record.text_headers()
    try:
        message = m.decode(headers, record.value)
    except DecodeError:
        return
    assert type(message).DESCRIPTOR.name == headers[m.TYPE_HEADER]
    assert not m.missing_required(message)


@fuzz_settings
@given(data=st.one_of(r.package_payloads(), st.binary(max_size=3000)))
def test_decode_package_gives_a_package_or_a_decode_error(data: bytes) -> None:
    try:
        package = decode_package(data)
    except DecodeError:
        return
    assert isinstance(package, ContentPackage)


def test_a_value_nested_200_deep_is_refused_as_undecodable() -> None:
    with pytest.raises(DecodeError):
        decode_package(r.deep_package(200))


def _decoder(blobs: LocalBlobStore) -> RecordDecoder:
    """The subscriber's decoder of package records, following AGENTS[0], without signatures."""
    return RecordDecoder("fuzz.package", AGENTS[:1], blobs, DEFAULT_LIMITS, None)


def _record(garbage: r.Garbage) -> Record:
    return Record("fuzz.package", 0, 5, 0, garbage.key, garbage.text_headers(), garbage.value)


def _check_subscriber_takes(garbage: r.Garbage, blobs: LocalBlobStore) -> None:
    """What the subscriber does with a package record before Spark: decode it (message, blob,
    length, checksum, version, content rules) and, when that succeeds, merge the package into a
    change set and turn the upserted nodes into store rows. Every failure must be classified:
    permanent (recorded as REMOVED_FAILED at once) unless a retry can help, which for a record
    is only a well-formed reference to a blob that is not there (yet)."""
    decoded = _decoder(blobs).decode(_record(garbage))
    error = decoded.error
    if error is not None:
        if decoded.unknown or decoded.permanent:
            return
        message = decoded.package_message
        ref = message.pkg_binary_ref if message is not None else ""
        transient = isinstance(error, ScdError) and error.retriable
        assert transient, (
            f"{type(error).__name__} ({str(error)[:300]}) is neither permanent nor a retriable "
            f"scd error: the import retries it, forever with max_retries -1, for {garbage!r}"
        )
        well_formed_ref = bool(ref) and ref not in r.MALFORMED_REFS
        assert well_formed_ref, (
            f"{type(error).__name__} ({str(error)[:300]}) is retriable, but {garbage!r} refers "
            f"to no blob a store can ever hold ({ref[:80]!r}): retried forever"
        )
        return
    message = decoded.package_message
    if message is None or decoded.package is None:
        return  # another agent's package, or another message type: skipped
    changes = ChangeSet()
    unit = Unit(5, message.pub_agent_name, message.pkg_id, message.req_type, decoded.package)
    try:
        changes.add(unit)
    except PermanentError:
        return
    for node in changes.upserts.values():
        node_row(node, 5, message.pkg_id, message.pub_agent_name, 0)


@fuzz_settings
@given(garbage=r.garbage(AGENTS, kinds=["package"]))
def test_the_subscriber_classifies_every_hostile_package_topic_record(
    garbage: r.Garbage, blobs: LocalBlobStore
) -> None:
    _check_subscriber_takes(garbage, blobs)


@fuzz_settings
@given(message=r.package_messages(AGENTS[:1]))
def test_the_subscriber_classifies_every_hostile_package_message(
    message: m.PackageMessage, blobs: LocalBlobStore
) -> None:
    garbage = r.Garbage("package", message.SerializeToString(), r.typed("PackageMessage"))
    _check_subscriber_takes(garbage, blobs)


@pytest.mark.parametrize("ref", r.MALFORMED_REFS)
def test_a_malformed_package_reference_is_a_permanent_failure(
    ref: str, blobs: LocalBlobStore
) -> None:
    message = m.PackageMessage(
        pub_sling_id="p",
        pub_agent_name=AGENTS[0],
        pkg_id="x",
        req_type=m.ReqType.ADD,
        pkg_type=r.PACKAGE_TYPE,
        pkg_length=10,
        pkg_binary_ref=ref,
    )
    record = r.Garbage("package", message.SerializeToString(), r.typed("PackageMessage"))
    decoded = _decoder(blobs).decode(_record(record))
    assert decoded.error is not None, f"reference {ref[:60]!r} is accepted"
    assert decoded.permanent, (
        f"reference {ref[:60]!r}: {type(decoded.error).__name__} "
        f"({str(decoded.error)[:200]}) is not "
        "permanent; a subscriber with max_retries -1 retries this record forever"
    )


@fuzz_settings
@given(package=r.content_packages())
def test_every_package_the_content_rules_accept_becomes_store_rows(
    package: ContentPackage,
) -> None:
    try:
        check_package(package, package.req_type)
    except ScdError:
        return
    changes = ChangeSet()
    changes.add(Unit(7, "publish", "p", package.req_type, package))
    for node in changes.upserts.values():
        node_row(node, 7, "p", "publish", 0)


@pytest.mark.parametrize(
    "name", [n for n in r.TYPE_NAMES if n != "PingMessage"]
)  # a PingMessage has no fields, so any bytes without fields are one
def test_junk_under_every_type_header_is_a_decode_error(name: str) -> None:
    with pytest.raises(DecodeError):
        m.decode({m.TYPE_HEADER: name}, b"\xff\xff\xff\xff")
