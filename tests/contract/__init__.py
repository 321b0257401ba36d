"""Contract suites run unchanged against every backend."""

import pytest

# Shared suites are imported by test modules; rewrite their asserts so failures show values.
pytest.register_assert_rewrite(
    "tests.contract.journal_contract",
    "tests.contract.blobstore_contract",
    "tests.contract.store_contract",
)
