"""A sample of the requests the publisher accepts (the generator of
tests/e2e/test_accepted_requests_import.py) committed to a real Delta table and read
back: every node is there, with its offset and properties."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from journal.content.package import decode_package
from publisher.distribute.builder import PackageBuilder
from subscriber.store.delta import DeltaStore
from tests.e2e.test_accepted_requests_import import (
    build,
    builder,
    requests,
    subscriber_rows,
)

__all__ = ["builder"]  # the module-scoped fixture, shared with the unit suite


@pytest.mark.slow
@settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(body=requests())
def test_a_sample_of_accepted_requests_commits_to_delta(
    builder: PackageBuilder, delta_sample: DeltaStore, body: dict[str, Any]
) -> None:
    built = build(builder, body)
    if built is None:
        return
    offset = next(OFFSETS)
    changes = delta_sample.begin()
    changes.add(subscriber_rows(built, offset))
    delta_sample.commit(changes)
    in_table = {n.path: n for n in delta_sample.nodes("/")}
    for node in decode_package(built.data).nodes:
        stored = in_table.get(node.path)
        assert stored is not None
        assert stored.offset == offset
        assert set(stored.properties) | set(stored.binaries) == set(node.properties)


OFFSETS = itertools.count()


@pytest.fixture(scope="module")
def delta_sample(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> DeltaStore:
    store = DeltaStore(spark, str(Path(tmp_path_factory.mktemp("delta")) / "store"))
    store.open()
    return store
