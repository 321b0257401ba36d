"""Settings from a TOML configuration file beneath environment variables."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from journal.config import config_file
from journal.errors import ConfigError
from journal.settings import JournalSettings
from subscriber.settings import SubscriberSettings


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "scd.toml"
    path.write_text(text)
    return path


def test_file_values_with_env_on_top(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(
        tmp_path,
        """
[journal]
backend = "kafka"
bootstrap_servers = "file:9092"
topics = { package = "site.package" }

[subscriber]
agent_name = "from-file"
max_retries = 3
""",
    )
    monkeypatch.setenv("SCD_JOURNAL_BOOTSTRAP_SERVERS", "env:9092")
    with config_file(path):
        journal = JournalSettings()
        subscriber = SubscriberSettings()
    assert journal.backend == "kafka"
    assert journal.bootstrap_servers == "env:9092"  # the environment wins over the file
    assert journal.topics.package == "site.package"
    assert subscriber.agent_name == "from-file" and subscriber.max_retries == 3
    assert subscriber.journal.topics.package == "site.package"
    assert JournalSettings().backend == "sqlite"  # outside the block: defaults again


def test_unknown_section_is_refused(tmp_path: Path) -> None:
    with (
        pytest.raises(ConfigError, match=r"unknown section.*jurnal"),
        config_file(write(tmp_path, "[jurnal]\nbackend = 'kafka'\n")),
    ):
        pass


def test_bad_toml_and_missing_file(tmp_path: Path) -> None:
    with (
        pytest.raises(ConfigError, match="not valid TOML"),
        config_file(write(tmp_path, "[journal\n")),
    ):
        pass
    with pytest.raises(ConfigError, match="cannot read"), config_file(tmp_path / "absent.toml"):
        pass


def test_invalid_value_names_the_setting(tmp_path: Path) -> None:
    with (
        config_file(write(tmp_path, "[subscriber]\nbatch_max = 0\n")),
        pytest.raises(ValidationError, match="batch_max"),
    ):
        SubscriberSettings()


def test_unknown_setting_is_refused(tmp_path: Path) -> None:
    with (
        config_file(write(tmp_path, "[journal]\nbootstrap = 'x'\n")),
        pytest.raises(ValidationError, match="bootstrap"),
    ):
        JournalSettings()
