from __future__ import annotations

import pytest
from pydantic import ValidationError

from journal.api import Record
from journal.settings import TopicSettings
from journal.sqlite.journal import SqliteConsumer
from publisher.settings import PublisherSettings
from tests.publisher.conftest import AgentFactory
from tests.waiting import wait_for

TOPICS = TopicSettings()

GOOD_TOKEN = "a-real-secret-of-enough-length"


@pytest.mark.parametrize("token", [None, "changethis", "secret", "short-token"])
def test_placeholder_or_missing_token_is_refused_outside_dev_mode(token: str | None) -> None:
    with pytest.raises(ValidationError, match="SCD_PUBLISHER_API_TOKEN"):
        PublisherSettings.model_validate({"api_token": token})


@pytest.mark.parametrize("token", [None, "changethis"])
def test_dev_mode_accepts_missing_or_placeholder_token(token: str | None) -> None:
    settings = PublisherSettings.model_validate({"dev_mode": True, "api_token": token})
    assert (settings.api_token is not None) is (token is not None)


def test_environment_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCD_PUBLISHER_API_TOKEN", GOOD_TOKEN)
    monkeypatch.setenv("SCD_PUBLISHER_AGENT_NAME", "agent-7")
    monkeypatch.setenv("SCD_PUBLISHER_INLINE_PACKAGE_LIMIT_BYTES", "1000")
    settings = PublisherSettings()
    assert settings.agent_name == "agent-7"
    assert settings.inline_package_limit_bytes == 1000
    assert settings.api_token is not None
    assert settings.api_token.get_secret_value() == GOOD_TOKEN
    assert GOOD_TOKEN not in repr(settings)


@pytest.mark.parametrize(
    ("field", "value", "setting"),
    [
        ("inline_package_limit_bytes", 10**9, "INLINE_PACKAGE_LIMIT_BYTES"),
        ("agent_name", "bad name!", "agent_name"),
        ("discovery_ttl_s", 0, "discovery_ttl_s"),
        ("unknown_setting", 1, "unknown_setting"),
    ],
)
def test_bad_settings_name_the_setting(field: str, value: object, setting: str) -> None:
    with pytest.raises(ValidationError, match=setting):
        PublisherSettings.model_validate({"api_token": GOOD_TOKEN, field: value})


def test_the_readers_poll_the_journal_poll_timeout_s_at_a_time(
    make_agent: AgentFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SCD_PUBLISHER_POLL_TIMEOUT_S reaches the queue cache tail and both pollers."""
    waits: dict[str, set[float]] = {}
    poll = SqliteConsumer.poll

    def recorded(self: SqliteConsumer, timeout_s: float, max_records: int = 500) -> list[Record]:
        waits.setdefault(self.topic, set()).add(timeout_s)
        return poll(self, timeout_s, max_records)

    monkeypatch.setattr(SqliteConsumer, "poll", recorded)
    make_agent(poll_timeout_s=0.03)
    readers = {TOPICS.package, TOPICS.discovery, TOPICS.status}
    wait_for(lambda: readers <= waits.keys(), what="a poll of each reader")
    assert {topic: waits[topic] for topic in readers} == {topic: {0.03} for topic in readers}
