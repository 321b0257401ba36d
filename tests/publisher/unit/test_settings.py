from __future__ import annotations

import pytest
from pydantic import ValidationError

from publisher.settings import PublisherSettings

GOOD_TOKEN = "a-real-secret-of-enough-length"


@pytest.mark.parametrize("token", [None, "changethis", "secret", "short-token"])
def test_placeholder_or_missing_token_is_refused_outside_dev_mode(token: str | None) -> None:
    with pytest.raises(ValidationError, match="SCD_PUBLISHER_API_TOKEN"):
        PublisherSettings.model_validate({"api_token": token})


@pytest.mark.parametrize("token", [None, "changethis"])
def test_dev_mode_accepts_missing_or_placeholder_token(token: str | None) -> None:
    settings = PublisherSettings.model_validate({"dev_mode": True, "api_token": token})
    assert settings.auth_enabled is (token is not None)


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
