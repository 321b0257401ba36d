"""The console's page, assets and read-only JSON (publisher/api/routes/console.py), with
simulated subscribers on the embedded journal. The page itself runs in a real browser in
tests/operator/test_console_browser.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from journal import failure_events
from journal.settings import JournalSettings
from journal.sqlite.journal import SqliteJournal
from journal.topics import topic_specs
from journal.wire.messages import ReqType
from publisher.agent import PublisherAgent
from publisher.api import create_app
from publisher.console.recent_events import READ_WINDOW
from tests.publisher.conftest import AUTH, AgentFactory
from tests.publisher.packages import put_packages
from tests.publisher.unit.test_queues_api import distribute, subscriber, wait_queue
from tests.waiting import wait_for

STATIC = Path(__file__).resolve().parents[3] / "publisher" / "console" / "static"
EVIL = "/evil/<script>alert(1)</script>\x1b[31mred"


def packages(client: TestClient, **params: Any) -> dict[str, Any]:
    response = client.get("/console/api/packages", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_page_and_assets_come_from_the_publisher_with_a_strict_policy(
    client: TestClient,
) -> None:
    page = client.get("/console")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy
    # Offline machines: every asset the page names is served here, nothing from elsewhere.
    referenced = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert sorted(referenced) == [
        "/console/assets/console.css",
        "/console/assets/console.js",
        "/console/assets/text.js",
        "data:,",  # an empty icon: no /favicon.ico request
    ]
    assert "http://" not in page.text
    assert "https://" not in page.text
    js = client.get("/console/assets/console.js")
    assert js.status_code == 200
    assert js.headers["content-type"].startswith("text/javascript")
    assert client.get("/console/assets/console.css").headers["content-type"].startswith("text/css")
    for name in ("index.html", "..%2F..%2Fapi%2Froutes%2Fconsole.py", "nope.js"):
        assert client.get(f"/console/assets/{name}").status_code == 404


def test_script_builds_the_page_from_text_nodes_only() -> None:
    """Escaping by construction: strings from the server never pass through an HTML parser."""
    script = (STATIC / "console.js").read_text() + (STATIC / "text.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script, sink
    # The token travels in a header only, never in a URL or a cookie.
    assert "Authorization" in script
    assert "document.cookie" not in script
    assert "sessionStorage" in script
    assert "localStorage" not in script


def test_latest_packages_newest_first_with_import_counts(
    client: TestClient, journal: SqliteJournal
) -> None:
    offsets = distribute(client, 4)
    a, b = subscriber(journal, "a"), subscriber(journal, "b")
    a.announce(offsets[3])
    b.announce(offsets[1])
    a.failed(offsets[2])  # a gave up on it: processed, not imported
    wait_queue(client, "b-subscriber", size=2)
    wait_queue(client, "a-subscriber", errorQueueSize=1)
    view = packages(client, limit=3)
    assert view["subscribers"] == 2
    assert view["nextOffset"] == offsets[3] + 1
    rows = view["packages"]
    assert [r["offset"] for r in rows] == offsets[:0:-1]
    assert [r["imported"] for r in rows] == [1, 0, 2]
    assert [r["failed"] for r in rows] == [0, 1, 0]
    first = rows[-1]
    assert first["action"] == "DELETE"
    assert first["paths"] == ["/p1"]
    assert first["spilled"] is False
    assert first["size"] > 0
    assert first["ageS"] >= 0
    assert first["packageId"]
    assert client.get("/console/api/packages", params={"limit": 0}).status_code == 422


def test_latest_packages_look_past_test_packages_and_other_agents(
    client: TestClient, journal: SqliteJournal
) -> None:
    mine = distribute(client, 2)
    put_packages(journal, 5, agent="another-agent")
    put_packages(journal, 5, req_type=ReqType.TEST)
    # Once the cache's tail has read the 10 records after mine:
    view = wait_for(lambda: (v := packages(client, limit=2))["nextOffset"] == mine[-1] + 11 and v)
    assert [r["offset"] for r in view["packages"]] == mine[::-1]


def test_packages_from_before_the_publisher_started_are_fetched_once(
    journal: SqliteJournal, journal_settings: JournalSettings, make_agent: AgentFactory
) -> None:
    journal.create_topics(topic_specs(journal_settings))
    earlier = put_packages(journal, 3, paths=[EVIL], deep_paths=[EVIL])
    agent = make_agent(inline_package_limit_bytes=4000)  # the 5000-byte packages spilled
    client = TestClient(create_app(agent), headers=AUTH)
    rows = packages(client)["packages"]
    assert [r["offset"] for r in rows] == earlier[::-1]
    # Markup and terminal escapes come back as the JSON strings they are; the page escapes.
    assert rows[0]["paths"] == [EVIL]
    assert rows[0]["deepPaths"] == [EVIL]
    assert all(r["spilled"] for r in rows)
    assert {r["imported"] for r in rows} == {0}
    assert {r["failed"] for r in rows} == {0}


def test_events_show_what_the_leader_sent(client: TestClient, journal: SqliteJournal) -> None:
    view = client.get("/console/api/events").json()
    assert view["events"] == []
    assert view["error"] is None
    assert view["topic"] == "scd.event"
    s = subscriber(journal, "s")
    s.announce(-1)
    wait_queue(client, "s-subscriber")
    # The leader recorded where events start (after -1) before the packages come.
    wait_for(lambda: client.get("/agent").json()["lastEventOffset"] == -1, what="events start")
    offsets = distribute(client, 3)
    s.announce(offsets[-1])

    def sent() -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = client.get("/console/api/events").json()["events"]
        return events if len(events) == 3 else []

    events = wait_for(sent, what="three distributed events")
    assert [e["offset"] for e in events] == offsets[::-1]
    assert events[0]["paths"] == ["/p2"]
    assert events[0]["application"] == "pub-1"
    limited = client.get("/console/api/events", params={"limit": 1}).json()["events"]
    assert [e["offset"] for e in limited] == [offsets[-1]]
    assert READ_WINDOW >= 100  # the page asks for far fewer


def test_failure_events_are_shown_and_hostile_ones_skipped_and_counted(
    agent: PublisherAgent, client: TestClient, journal: SqliteJournal
) -> None:
    topic = "scd.event"
    good = failure_events.FailureEvent(
        pub_agent_name="publish",
        sub_agent_name="s",
        sub_sling_id="s-instance",
        package_id="pkg-3",
        offset=3,
        attempt=2,
        max_retries=1,
        will_discard=True,
        permanent=False,
        exception="BlobUnavailable",
        message=EVIL,
    )
    others = failure_events.FailureEvent(**{**good.__dict__, "pub_agent_name": "other"})
    hostile = [
        b"[" * 4000,
        b'{"offset": "3"}',
        good.to_json().replace(b'"attempt":2', b'"attempt":-5'),
        b"x" * 60_000,  # under the topic limit, over the event limit
    ]
    for value in [good.to_json(), others.to_json(), *hostile]:
        journal.send(topic, value, key=b"s", headers=failure_events.headers())

    def shown() -> list[dict[str, Any]]:
        failures: list[dict[str, Any]] = client.get("/console/api/events").json()["failures"]
        return failures

    (row,) = wait_for(shown, what="the failure event")
    assert row["offset"] == 3
    assert row["subscriber"] == "s-instance-s"
    assert (row["attempt"], row["maxRetries"], row["willDiscard"]) == (2, 1, True)
    assert (row["errorClass"], row["exception"], row["message"]) == (
        "transient",
        "BlobUnavailable",
        EVIL,
    )
    bad = f'scd_publisher_bad_records_total{{topic="{topic}"}} 4.0'
    assert bad in client.get("/metrics").text
    # A new record makes the console read the window again: the bad ones are not counted twice.
    journal.send(topic, good.to_json(), key=b"s", headers=failure_events.headers())
    wait_for(lambda: len(shown()) == 2, what="the second failure event")
    assert bad in client.get("/metrics").text
    # The read-back of distributed events passes them by: not taken for an event of this agent
    # (whose offset 3 would be beyond the empty log's end, a bad record), nor counted again.
    assert agent.events.read_back() is None
    assert bad in client.get("/metrics").text


def test_head_errors_name_each_failing_queue_once(
    client: TestClient, journal: SqliteJournal
) -> None:
    offsets = distribute(client, 2)
    failing, fine = subscriber(journal, "f"), subscriber(journal, "ok")
    failing.announce(-1, retries=2)
    fine.announce(offsets[-1])
    failing.log_error(offsets[0], "first try")
    failing.log_error(offsets[0], "<b>disk</b> \x1b[31mfull")
    failing.log_error(offsets[1], "not the head")
    wait_queue(client, "f-subscriber", headAttempts=2)

    def reported() -> list[dict[str, Any]]:
        errors: list[dict[str, Any]] = client.get("/console/api/head-errors").json()
        return errors if errors and errors[0]["message"].startswith("<b>") else []

    (error,) = wait_for(reported, what="the head error")
    assert error["queue"] == "f-subscriber"
    assert error["offset"] == offsets[0]
    assert error["message"] == "<b>disk</b> \x1b[31mfull"
    assert error["attempts"] == 2


def test_console_reads_need_no_token_and_actions_stay_guarded(agent: PublisherAgent) -> None:
    anonymous = TestClient(create_app(agent))
    for path in ("/console", "/console/api/packages", "/console/api/events"):
        assert anonymous.get(path).status_code == 200, path
    assert anonymous.get("/console/api/head-errors").json() == []
    # The page acts through the API; without the token those refuse and change nothing.
    before = agent.cache.next_offset
    refused = anonymous.post("/distribute", json={"action": "DELETE", "paths": ["/x"]})
    assert refused.status_code == 401
    assert anonymous.post("/cleanup").status_code == 401
    assert agent.journal.latest_offset(agent.topics.package) == before


def test_console_routes_are_under_the_body_limit(make_agent: AgentFactory) -> None:
    agent = make_agent(max_request_bytes=1024)
    client = TestClient(create_app(agent))
    for path in ("/console", "/console/api/packages"):
        assert client.request("GET", path, content=b"x" * 2000).status_code == 413, path


def test_a_hundred_subscribers_answer_quickly(client: TestClient, journal: SqliteJournal) -> None:
    distribute(client, 2)
    for i in range(100):
        subscriber(journal, f"s{i:03d}").announce(i % 2 - 1)
    wait_for(lambda: client.get("/agent").json()["queues"] == 100, what="100 queues")
    view = packages(client)
    assert view["subscribers"] == 100
    assert {r["imported"] for r in view["packages"]} == {0, 50}
