"""The console as an operator first meets it, in a real browser: a site distributed to four real
subscribers, one of which stopped and lags behind, and one that refused a package too large
for it (a permanent failure, in its error queue). The page must show exactly that; its
screenshot (build/test-artifacts/console/scene.png) is the picture of docs/console.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.operator.console_page import ConsolePage
from tests.operator.embedded import Embedded
from tests.operator.test_console_browser import IMPORT_WAIT_S, select_queue
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

SUBSCRIBERS = ("edge-eu-1", "edge-eu-2", "edge-us-1", "edge-us-2")
LAGGING = "edge-us-1"
FAILING = "edge-eu-2"
# edge-eu-2 accepts packages up to this size decoded: the archive page below is larger.
SMALL_LIMIT_BYTES = 4096
ARCHIVE = {
    "action": "ADD",
    "paths": ["/news/archive"],
    "nodes": [{"path": "/news/archive", "properties": {"body": "archived news " * 800}}],
}


def imported(page: ConsolePage, offset: int) -> str:
    """The Imported column of package ``offset`` ("" until the page lists it)."""
    row = page.packages().get(offset)
    return row[6] if row else ""


def test_a_site_distributed_to_four_subscribers(
    embedded: Embedded, browser: Any, artifacts: Path
) -> None:
    for name in SUBSCRIBERS:
        limits = {"max_package_bytes": SMALL_LIMIT_BYTES} if name == FAILING else {}
        embedded.start_subscriber(name, max_retries=0, **limits)
    wait_for(lambda: all(embedded.queue(n) for n in SUBSCRIBERS), 60, "announcements")
    queues = {n: embedded.queue_name(n) for n in SUBSCRIBERS}
    page = ConsolePage(browser, embedded.url, artifacts / "console")
    page.open()
    page.wait(lambda: set(queues.values()) <= page.queues().keys(), "four queues")

    # The site, to everyone.
    site = [embedded.distribute({"action": "ADD", "deepPaths": [p]}) for p in ("/docs", "/news")]
    for offset in site:
        page.wait(lambda o=offset: imported(page, o) == "4 / 4", "4 imports", IMPORT_WAIT_S)

    # One subscriber stops; what comes next waits in its queue while the others import it.
    embedded.stop_subscriber(LAGGING)
    archive = embedded.distribute(ARCHIVE)
    later = embedded.distribute({"action": "ADD", "deepPaths": ["/docs"]})
    page.wait(lambda: imported(page, later) == "3 / 4", "3 imports", IMPORT_WAIT_S)
    page.wait(lambda: imported(page, archive) == "2 / 4 · 1 failed", "the refusal")
    page.wait(lambda: page.queues()[queues[LAGGING]]["size"] == "2", "the lagging queue")
    page.wait(lambda: page.queues()[queues[FAILING]]["errors"] == "1", "the error queue")
    for name in set(SUBSCRIBERS) - {LAGGING}:
        assert page.queues()[queues[name]]["size"] == "0", name
    select_queue(page, queues[FAILING])
    page.wait(lambda: archive in page.detail("#detail-errors"), "the failed package")
    assert "permanent" in page.detail("#detail-errors")[archive][3]
    browser.set_window_size(1366, 1300)
    try:
        page.shot("scene")
    finally:
        browser.set_window_size(1366, 900)
