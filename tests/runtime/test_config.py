"""Settings from a TOML configuration file beneath environment variables."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from blobstore.settings import BlobStoreSettings
from journal.settings import JournalSettings
from publisher.settings import PublisherSettings
from runtime.config import ScdSettings, config_file
from runtime.errors import ConfigError
from scd.cli import main as scd_main
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
    assert subscriber.agent_name == "from-file"
    assert subscriber.max_retries == 3
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


def test_publisher_settings_read_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[publisher]\nagent_name = 'site'\ndev_mode = true\nport = 9090\n")
    with config_file(path):
        settings = PublisherSettings()
    assert (settings.agent_name, settings.port) == ("site", 9090)


@pytest.mark.parametrize(
    ("model", "name", "hint"),
    [
        (SubscriberSettings, "SCD_SUBSCRIBER_BATCH_MAXX", "SCD_SUBSCRIBER_BATCH_MAX"),
        (JournalSettings, "SCD_JOURNAL_TOPICS__PACKAGES", "SCD_JOURNAL_TOPICS__PACKAGE"),
        (BlobStoreSettings, "scd_blob_bucket_name", "SCD_BLOB_BUCKET"),
        (PublisherSettings, "SCD_PUBLISHER_APITOKEN", "SCD_PUBLISHER_API_TOKEN"),
    ],
)
def test_unknown_environment_variable_is_refused(
    monkeypatch: pytest.MonkeyPatch, model: type[ScdSettings], name: str, hint: str
) -> None:
    monkeypatch.setenv("SCD_PUBLISHER_DEV_MODE", "true")
    monkeypatch.setenv(name, "1")
    with pytest.raises(ConfigError) as caught:
        model()
    assert f"{name} (did you mean {hint}?)" in str(caught.value)


def test_variables_of_other_prefixes_and_known_extras_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCD_PUBLISHER_URL", "http://127.0.0.1:8080")  # read by the CLI
    monkeypatch.setenv("SCD_PUBLISHER_DEV_MODE", "true")
    monkeypatch.setenv("SCD_JOURNAL_TOPICS__PACKAGE", "site.package")  # nested setting
    monkeypatch.setenv("SCD_BLOB_BACKEND", "local")
    monkeypatch.setenv("SCD_BLOB_LOCAL_ROOT", "/tmp/blobs")
    monkeypatch.setenv("SCD_HOME", "/tmp/scd")  # deploy scripts, no settings prefix
    monkeypatch.setenv("SCD_JOURNAL_BACKEND", "sqlite")
    assert PublisherSettings().dev_mode
    subscriber = SubscriberSettings()
    assert subscriber.journal.backend == "sqlite"
    assert subscriber.journal.topics.package == "site.package"
    assert subscriber.blobstore is not None
    assert subscriber.blobstore.backend == "local"
    assert JournalSettings().backend == "sqlite"


def test_daemons_refuse_an_unknown_variable_with_exit_code_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SCD_SUBSCRIBER_STORE_PTH", "/x")
    assert scd_main(["subscriber"]) == 2
    assert "SCD_SUBSCRIBER_STORE_PTH (did you mean SCD_SUBSCRIBER_STORE_PATH?)" in (
        capsys.readouterr().err
    )
    monkeypatch.setenv("SCD_PUBLISHER_PROT", "8080")
    assert scd_main(["publisher"]) == 2
    assert "SCD_PUBLISHER_PROT (did you mean SCD_PUBLISHER_PORT?)" in capsys.readouterr().err


def test_the_subscriber_takes_journal_and_blob_store_from_their_own_variables(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SCD_SUBSCRIBER_JOURNAL__BACKEND", "kafka")
    with pytest.raises(ConfigError) as caught:
        SubscriberSettings()
    assert "SCD_SUBSCRIBER_JOURNAL__BACKEND (set SCD_JOURNAL_BACKEND instead)" in str(caught.value)
    monkeypatch.delenv("SCD_SUBSCRIBER_JOURNAL__BACKEND")
    monkeypatch.setenv("SCD_SUBSCRIBER_BLOBSTORE", "{}")
    with pytest.raises(ConfigError, match=r"SCD_SUBSCRIBER_BLOBSTORE \(set SCD_BLOB_\* instead"):
        SubscriberSettings()
    monkeypatch.delenv("SCD_SUBSCRIBER_BLOBSTORE")
    with (
        config_file(write(tmp_path, "[subscriber]\njournal = { backend = 'kafka' }\n")),
        pytest.raises(ConfigError, match=r"\[subscriber\] journal is not read there"),
    ):
        SubscriberSettings()
