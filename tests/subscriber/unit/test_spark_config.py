"""Subscriber settings that size the process: the JVM heap (a setting with a clear rule, so a
typo or a hostile value is refused at start instead of reaching spark-submit) and the fold
growth."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from subscriber.settings import SubscriberSettings
from subscriber.spark import spark_config


def test_the_jvm_heap_is_512m_unless_set() -> None:
    assert spark_config(SubscriberSettings())["spark.driver.memory"] == "512m"
    assert spark_config(SubscriberSettings(spark_driver_memory="2g"))["spark.driver.memory"] == "2g"
    assert SubscriberSettings(spark_driver_memory="450M").spark_driver_memory == "450M"


@pytest.mark.parametrize(
    "value",
    ["", "512", "0m", "1.5g", "512mb", "-1g", "1g --conf x=y", "9999999g", "512m\n", "449m", "4k"],
)
def test_a_heap_that_is_not_a_jvm_size_is_refused(value: str) -> None:
    with pytest.raises(ValidationError, match="spark_driver_memory"):
        SubscriberSettings(spark_driver_memory=value)


@pytest.mark.parametrize("value", ["0", "-0.5", "10.5", "nan", "inf", "half"])
def test_a_fold_growth_out_of_range_is_refused(value: str) -> None:
    with pytest.raises(ValidationError, match="maintenance_fold_growth"):
        SubscriberSettings.model_validate({"maintenance_fold_growth": value})
