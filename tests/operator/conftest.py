"""Fixtures of the operator tests: embedded scd on the test run's SparkSession, a headless
Chromium driven by selenium, and where screenshots and logs go."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.operator.embedded import Embedded

ROOT = Path(__file__).resolve().parents[2]
# Debian's packages (`apt-get install chromium chromium-driver prometheus`; .ci/run installs
# them): browser and driver of one build, no download at test time.
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def require(*programs: str) -> list[str]:
    """Paths of ``programs``; a missing one skips the test on a developer machine and fails it
    in CI, where .ci/run installs them (a silently skipped test would prove nothing there)."""
    found = [shutil.which(p) for p in programs]
    missing = [p for p, f in zip(programs, found, strict=True) if f is None]
    if missing:
        message = (
            f"not installed: {', '.join(missing)} "
            "(apt-get install chromium chromium-driver prometheus)"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return [f for f in found if f is not None]


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Screenshots and server logs of the operator tests, kept after the run (build/ is
    ignored by git; CI can collect it)."""
    path = Path(os.environ.get("SCD_TEST_ARTIFACTS", ROOT / "build" / "test-artifacts"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def embedded(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Embedded]:
    scd = Embedded(tmp_path_factory.mktemp("embedded"), spark)
    try:
        yield scd
    finally:
        scd.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium, driver_path = require(CHROMIUM, CHROMEDRIVER)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root in a container
        "--disable-dev-shm-usage",  # a container's /dev/shm is small
        "--window-size=1366,900",
        "--lang=en-US",
    ):
        options.add_argument(argument)
    # An explicit driver: selenium would otherwise look for (and download) a matching one.
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    try:
        yield driver
    finally:
        driver.quit()
