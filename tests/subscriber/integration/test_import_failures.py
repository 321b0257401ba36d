"""The permanent failure classes of tests/subscriber/unit/test_import_failures.py, again on real
Kafka and S3."""

from __future__ import annotations

import pytest

from tests.subscriber.harness import Env
from tests.subscriber.unit.test_import_failures import (
    test_a_permanent_failure_is_committed_with_its_batch_and_never_blocks,
)

__all__ = ["test_a_permanent_failure_is_committed_with_its_batch_and_never_blocks"]

pytestmark = pytest.mark.integration


@pytest.fixture
def any_env(env: Env) -> Env:
    return env
