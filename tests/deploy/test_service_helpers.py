"""Helpers of tests/services.py that need no infrastructure."""

from __future__ import annotations

import re

import pytest

from tests import services

# Valid as an S3 bucket name and as a Kafka topic name, with room for test suffixes.
NAME = re.compile(r"^[a-z][a-z0-9-]{2,40}$")


@pytest.mark.parametrize(
    "hint",
    ["test_simple", "test_param[case-1/ü]", "123_starts_with_digit", "", "x" * 200, "test___"],
)
def test_unique_name_is_a_valid_short_bucket_and_topic_name(hint: str) -> None:
    name = services.unique_name(hint)
    assert NAME.match(name), name
    assert "--" not in name


def test_unique_names_differ() -> None:
    assert len({services.unique_name("test_same") for _ in range(100)}) == 100


def test_native_defaults_come_from_the_deploy_scripts() -> None:
    values = services.native_defaults(
        {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "SCD_S3_PORT": "19555"}
    )
    assert values["SCD_TEST_S3_ENDPOINT"] == "http://127.0.0.1:19555"
    assert values["SCD_TEST_KAFKA_BOOTSTRAP"].startswith("127.0.0.1:")
