"""The console in a real browser (headless Chromium driven by selenium) against a running
publisher and two real subscribers on the embedded journal: the page loads and shows both
queues; a wrong token is refused visibly and changes nothing; a distribute made through the
page appears on the log and drains; markup and terminal escapes in a path and in errors are
shown as text; each subscriber's failed attempt shows as a failure event (discarded or
retried); a clear made through the page shrinks a blocked queue; a pause made through the page
shows PAUSED and its button resumes; a phone-sized window
needs no sideways scrolling; 100 subscribers page, filter and sort, staged ones showing
WAITING_FOR_CANARY and CANARY_FAILED.

Screenshots land in build/test-artifacts/console (SCD_TEST_ARTIFACTS), hostile text included;
they are test artifacts only (docs/console.png comes from test_console_scene.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.support.select import Select

from blobstore.local import LocalBlobStore
from journal.settings import JournalSettings, TopicSettings
from journal.sqlite.journal import SqliteJournal
from publisher.agent import PublisherAgent
from publisher.api import create_app
from runtime.http_server import AppServer
from tests.operator.console_page import ConsolePage
from tests.operator.embedded import TOKEN, Embedded
from tests.publisher.conftest import publisher_settings
from tests.publisher.packages import put_packages
from tests.publisher.simulate import SimulatedSubscriber
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

# Hostile text where operators look: a package id and a path from a faulty writer, and an
# error message. Each tries to run script (sets window.scdXss) or recolour a terminal.
EVIL_ID = "pkg-<script>window.scdXss=1</script>"
EVIL_PATH = '/bad/<img src=x onerror="window.scdXss=2">\x1b[31mred'
EVIL_ERROR = "import failed: <script>window.scdXss=3</script> \x1b[31mdisk on fire\x1b[0m"
# Spark imports on a loaded 2-core machine: the first commit of a new store takes longest.
IMPORT_WAIT_S = 240.0


def shown(text: str) -> str:
    """``text`` as the page shows it: control characters spelled out."""
    return re.sub(r"[\x00-\x1f\x7f]", lambda c: f"\\x{ord(c.group()):02x}", text)


def select_queue(page: ConsolePage, name: str) -> None:
    page.js(
        "[...document.querySelectorAll('#queues tbody tr')]"
        ".find(r => r.getAttribute('data-queue') === arguments[0]).click()",
        name,
    )


def test_console_in_a_browser(embedded: Embedded, browser: Any, artifacts: Path) -> None:
    embedded.start_subscriber("edge-a", editable=False, max_retries=0)
    embedded.start_subscriber("edge-b", editable=True, max_retries=-1)
    wait_for(lambda: embedded.queue("edge-a") and embedded.queue("edge-b"), 60, "announcements")
    qa, qb = embedded.queue_name("edge-a"), embedded.queue_name("edge-b")
    page = ConsolePage(browser, embedded.url, artifacts / "console")
    page.open()
    page.wait(lambda: {qa, qb} <= page.queues().keys(), "both queues")
    assert page.queues()[qa]["editable"] == "no"
    assert page.queues()[qb]["editable"] == "yes"
    page.shot("1-loaded")

    # No token, then a wrong one: each action shows the 401, nothing reaches the log, no URL
    # holds the token.
    before = embedded.next_offset()
    assert page.text("token-state") == "no token: actions will be refused"
    answer = page.act("blob cleanup", lambda: page.click("cleanup"))
    assert answer.startswith("err"), answer
    assert "HTTP 401" in answer, answer
    page.set_token("not-the-token-0123456789")
    page.type("dist-paths", "/docs")
    answer = page.act("distribute ADD /docs", lambda: page.click("dist-submit"))
    assert answer.startswith("err"), answer
    assert "HTTP 401" in answer, answer
    answer = page.act("blob cleanup", lambda: page.click("cleanup"))
    assert answer.startswith("err"), answer
    assert "HTTP 401" in answer, answer
    assert embedded.next_offset() == before
    assert "token" not in browser.current_url
    assert page.text("token-state") == "token set for this tab"
    page.shot("2-wrong-token")

    # The right token: a distribute through the page appears on the log and drains.
    page.set_token(TOKEN)
    answer = page.act("distribute ADD /docs", lambda: page.click("dist-submit"))
    assert answer.startswith("ok"), answer
    found = re.search(r"offset (\d+)", answer)
    assert found is not None
    assert "inline" in answer
    offset = int(found.group(1))
    page.wait(lambda: offset in page.packages(), f"package {offset}")
    page.wait(lambda: page.packages()[offset][6] == "2 / 2", "2 imports", IMPORT_WAIT_S)
    page.wait(lambda: all(page.queues()[q]["size"] == "0" for q in (qa, qb)), "empty queues")
    page.wait(lambda: offset in page.events(), f"the distributed event of {offset}")
    row = page.packages()[offset]
    assert row[1:3] == ["ADD", "/docs (deep)"], row
    assert row[4] == "inline", row
    page.shot("3-distributed")

    # A package no subscriber can read, from a faulty writer; two good ones queue behind it.
    bad = embedded.send_unreadable_package(EVIL_ID, EVIL_PATH)
    behind = [embedded.distribute({"action": "ADD", "deepPaths": ["/news"]}) for _ in range(2)]
    # Live: what happens elsewhere shows within 2 s (1 s polls; slack for a loaded machine).
    page.wait(lambda: set(behind) <= page.packages().keys(), "packages sent elsewhere", 3.0)
    # edge-a (no retries) gives up at once: one error-queue entry; edge-b blocks on it.
    wait_for(
        lambda: (q := embedded.queue("edge-a")) and q.error_queue_size == 1,
        IMPORT_WAIT_S,
        "edge-a's error queue entry",
    )
    # Each failed attempt is a failure event: edge-a's only attempt discards the package,
    # edge-b's are retried.
    page.wait(
        lambda: any(row[4] == "discarded" for row in page.failures(bad)),
        "edge-a's failure event",
        IMPORT_WAIT_S,
    )
    page.wait(lambda: any(row[4] == "retried" for row in page.failures(bad)), "edge-b's")
    (discarded,) = [row for row in page.failures(bad) if row[4] == "discarded"]
    assert discarded[1].endswith("-edge-a"), discarded
    assert discarded[2] == "1 / 1", discarded  # max_retries 0: one attempt in all
    assert discarded[3].startswith("transient PackageUnavailable: "), discarded
    embedded.report_error("edge-a", bad, EVIL_ERROR)
    page.wait(lambda: page.queues()[qb]["state"] == "BLOCKED", "edge-b blocked", IMPORT_WAIT_S)
    assert page.queues()[qb]["size"] == "3"
    assert page.queues()[qb]["head"] == str(bad)
    assert "<script>window.scdXss=1</script>" in page.queues()[qb]["error"]
    select_queue(page, qa)
    page.wait(lambda: EVIL_ERROR[:14] in page.detail("#detail-errors").get(bad, [""] * 4)[3], "")
    assert page.detail("#detail-errors")[bad][3] == shown(EVIL_ERROR)
    assert page.packages()[bad][2] == shown(EVIL_PATH)
    assert page.packages()[bad][6] == "0 / 2 · 1 failed"  # edge-a gave up, edge-b blocks
    assert page.js("return document.getElementById('clear-head').disabled") is True
    # Shown as text, never run: no handler fired, no element made from a string.
    assert page.js("return window.scdXss") is None
    assert page.js("return document.querySelectorAll('main img, main script').length") == 0
    assert "\x1b" not in page.js("return document.body.textContent")
    browser.set_window_size(1366, 1300)
    page.shot("4-error-queue")
    browser.set_window_size(1366, 900)

    # Clear the blocking head through the page: edge-b skips it and imports the rest.
    select_queue(page, qb)
    page.wait(lambda: list(page.detail("#detail-items")) == [bad, *behind], "edge-b's items")
    answer = page.act(f"clear head of {qb}", lambda: page.click("clear-head"))
    assert answer.startswith("ok"), answer
    assert "removed 1" in answer, answer
    page.wait(lambda: int(page.queues()[qb]["size"]) < 3, "edge-b's queue shrinking")
    page.wait(lambda: page.queues()[qb]["state"] == "IDLE", "edge-b drained", IMPORT_WAIT_S)
    page.shot("5-cleared")

    # Pause edge-b through the page: its queue shows PAUSED and the button resumes it.
    answer = page.act(f"pause {qb}", lambda: page.click("pause-toggle"))
    assert answer.startswith("ok"), answer
    page.wait(lambda: page.queues()[qb]["state"] == "PAUSED", "edge-b paused", IMPORT_WAIT_S)
    page.wait(lambda: page.text("pause-toggle") == "Resume", "the resume button")
    page.shot("5-paused")
    answer = page.act(f"resume {qb}", lambda: page.click("pause-toggle"))
    assert answer.startswith("ok"), answer
    page.wait(lambda: page.queues()[qb]["state"] == "IDLE", "edge-b resumed", IMPORT_WAIT_S)
    assert page.text("pause-toggle") == "Pause"

    # A phone: one column, no sideways scrolling of the page (wide tables scroll in place).
    browser.set_window_size(390, 844)
    try:
        assert page.js("return document.documentElement.scrollWidth <= window.innerWidth")
        page.shot("6-phone")
    finally:
        browser.set_window_size(1366, 900)


@pytest.fixture
def hundred(tmp_path: Path) -> Iterator[tuple[str, list[SimulatedSubscriber]]]:
    """A publisher (no Spark) whose 100 subscribers are simulated on the journal, queue sizes
    0..99, every tenth one blocked, s001 staged and waiting for its canary, s002 holding a
    package its canary failed."""
    js = JournalSettings(backend="sqlite", sqlite_path=tmp_path / "journal.db")
    journal = SqliteJournal(js.sqlite_path)
    blobs = LocalBlobStore(tmp_path / "blobs")
    agent = PublisherAgent(publisher_settings(), js, journal, blobs).start()
    server = AppServer(create_app(agent), name="publisher API")
    server.start()
    try:
        offsets = put_packages(journal, 100)
        subs = [SimulatedSubscriber(journal, TopicSettings(), f"s{i:03d}") for i in range(100)]
        for i, sub in enumerate(subs):
            sub.announce(
                offsets[-1] - i,
                retries=3 if i % 10 == 0 and i else 0,
                canary_pending=["canary"] if i == 1 else [],
                canary_failed=["canary"] if i == 2 else [],
            )
        wait_for(lambda: len(agent.queues.summaries()) == 100, what="100 queues")
        yield server.url, subs
    finally:
        server.stop()
        agent.stop()
        journal.close()


def test_a_hundred_subscribers_page_filter_and_sort(
    hundred: tuple[str, list[SimulatedSubscriber]], browser: Any, artifacts: Path
) -> None:
    url, subs = hundred
    page = ConsolePage(browser, url, artifacts / "console")
    page.open()
    page.wait(lambda: page.text("queue-count") == "100 of 100", "100 queues")
    assert page.text("queue-page") == "1 / 5"
    assert len(page.queues()) == 20
    first = sorted(s.queue_name for s in subs)[:20]
    assert list(page.queues()) == first
    page.click("queue-next")
    assert page.text("queue-page") == "2 / 5"
    page.type("queue-filter", "s042")
    page.wait(lambda: list(page.queues()) == ["s042-subscriber"], "one match")
    assert page.text("queue-page") == "1 / 1"
    assert page.queues()["s042-subscriber"]["size"] == "42"
    page.type("queue-filter", "")
    Select(page.driver.find_element("id", "queue-sort")).select_by_visible_text("largest first")
    page.wait(lambda: next(iter(page.queues())) == "s099-subscriber", "the largest queue first")
    Select(page.driver.find_element("id", "queue-state")).select_by_visible_text("BLOCKED")
    page.wait(lambda: page.text("queue-count") == "9 of 100", "the 9 blocked queues")
    assert {q["state"] for q in page.queues().values()} == {"BLOCKED"}
    page.shot("7-hundred-subscribers")
    # Staged subscribers: their wait and their hold, as their queues' states.
    Select(page.driver.find_element("id", "queue-state")).select_by_visible_text(
        "WAITING_FOR_CANARY"
    )
    page.wait(lambda: list(page.queues()) == ["s001-subscriber"], "the waiting queue")
    Select(page.driver.find_element("id", "queue-state")).select_by_visible_text("CANARY_FAILED")
    page.wait(lambda: list(page.queues()) == ["s002-subscriber"], "the held queue")
    assert page.queues()["s002-subscriber"]["state"] == "CANARY_FAILED"
    select_queue(page, "s002-subscriber")  # a resume imports the held package
    page.wait(lambda: page.text("pause-toggle") == "Resume", "the Resume button")
    page.shot("8-staged-subscribers")
