"""Property: every distribute request the publisher accepts builds a package that every
subscriber accepts and whose rows its Delta store can hold. Requests come from hypothesis,
hostile ones included (mixed lists, dates beyond year 9999, binaries in lists, odd paths and
names, numbers out of range); a refused one must be refused with a reason, not a crash.
tests/e2e/test_accepted_requests_delta.py commits a sample to a real Delta
table."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from blobstore.local import LocalBlobStore
from journal.content import rules
from journal.content.package import decode_package
from journal.content.rules import ContentRuleError
from publisher.distribute.builder import BuiltPackage, PackageBuilder
from publisher.distribute.request import DistributeRequest
from publisher.errors import InvalidRequest, PackageTooLarge
from subscriber.store.changes import Unit
from subscriber.store.rows import node_row

# Mostly valid pieces with hostile ones mixed in: a request is accepted only when all of its
# pieces are, so a generator of mostly hostile pieces would rarely test an accepted one.
HOSTILE_SEGMENT = st.one_of(
    st.sampled_from([".", "..", "", "x" * 256, "a\x00", "a\\b", "\ud800"]), st.text(max_size=8)
)
SEGMENT = st.one_of(st.sampled_from(["a", "b", "page", "ü", "a b"]), HOSTILE_SEGMENT)
PATH = st.lists(SEGMENT, min_size=1, max_size=3).map(lambda s: "/" + "/".join(s))
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
SCALAR = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=20),
    INT64,
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
HOSTILE_SCALAR = st.one_of(
    st.text(max_size=5),  # lone surrogates included
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=True, allow_infinity=True),
)
DATE = st.fixed_dictionaries(
    {
        "type": st.just("date"),
        "value": st.one_of(
            st.integers(min_value=rules.MIN_DATE_MS * 2, max_value=rules.MAX_DATE_MS * 2),
            st.sampled_from(
                [
                    "2024-05-01T00:00:00Z",
                    "9999-12-31T23:59:59.999+00:00",
                    "0001-01-01T00:00:00+01:00",
                    "0001-01-01T00:00:00-01:00",
                    "2024-05-01T00:00:00",
                ]
            ),
        ),
    }
)
BINARY = st.builds(
    lambda data, ctype: {"type": "binary", "base64": base64.b64encode(data).decode(), **ctype},
    st.binary(max_size=64),
    st.sampled_from([{}, {"contentType": "text/plain"}, {"contentType": "bad\ntype"}]),
)
TYPED = st.one_of(
    DATE,
    BINARY,
    st.fixed_dictionaries({"type": st.sampled_from(["long", "double"]), "value": SCALAR}),
)
ITEM = st.one_of(SCALAR, SCALAR, TYPED, HOSTILE_SCALAR)
VALUE = st.one_of(SCALAR, TYPED, st.lists(ITEM, max_size=4), HOSTILE_SCALAR)
NAME = st.one_of(
    st.sampled_from(["title", "jcr:title", "tags", "when"]),
    st.sampled_from(["a/b", "", "x" * 256, "t\tab"]),
    st.text(max_size=6),
)
NODE = st.fixed_dictionaries({"path": PATH, "properties": st.dictionaries(NAME, VALUE, max_size=3)})


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    """An ADD carrying its nodes, under a deep root or as shallow paths."""
    nodes = draw(st.lists(NODE, min_size=1, max_size=3))
    if draw(st.booleans()):
        root = draw(PATH)
        for n in nodes:  # mostly below the root, sometimes not
            if draw(st.integers(0, 9)):
                n["path"] = root.rstrip("/") + str(n["path"])
        return {"action": "ADD", "deepPaths": [root], "nodes": nodes}
    return {"action": "ADD", "paths": [n["path"] for n in nodes], "nodes": nodes}


def build(builder: PackageBuilder, body: dict[str, Any]) -> BuiltPackage | None:
    """The package the publisher sends for ``body``, or None when it refuses it (400/413/422)."""
    try:
        return builder.build(DistributeRequest.model_validate(body))
    except (ValidationError, InvalidRequest, ContentRuleError, PackageTooLarge):
        return None


def subscriber_rows(built: BuiltPackage, offset: int) -> Unit:
    """What a subscriber does with the package: decode, check every rule, build its rows."""
    package = decode_package(built.data)
    rules.check_package(package, built.action.req_type)
    for node in package.nodes:
        node_row(node, offset, built.package_id, "publish", 0)
    return Unit(offset, "publish", built.package_id, built.action.req_type, package)


@pytest.fixture(scope="module")
def builder(tmp_path_factory: pytest.TempPathFactory) -> PackageBuilder:
    blobs = LocalBlobStore(tmp_path_factory.mktemp("blobs"))
    return PackageBuilder(blobs, None, binary_threshold_bytes=32, max_package_bytes=1 << 20)


def test_every_accepted_request_imports(builder: PackageBuilder) -> None:
    seen = {"accepted": 0, "refused": 0}

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(body=requests())
    def accepted_requests_import(body: dict[str, Any]) -> None:
        built = build(builder, body)
        seen["refused" if built is None else "accepted"] += 1
        if built is not None:
            subscriber_rows(built, 0)

    accepted_requests_import()
    # A generator that only ever produced refused (or only accepted) requests would make the
    # property say nothing: both outcomes must have come up, in this run.
    assert seen["accepted"] > 20, seen
    assert seen["refused"] > 20, seen
