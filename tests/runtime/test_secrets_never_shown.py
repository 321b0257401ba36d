"""No secret reaches a settings error, a log line or a daemon's output: bad settings are named
with the rule they break but never echoed, and settings secrets are masked in every log line."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Self

import pytest
from pydantic import SecretStr, ValidationError, model_validator
from pydantic_settings import SettingsConfigDict

from journal.settings import JournalSettings
from publisher.settings import PublisherSettings
from runtime.config import ScdSettings, describe_settings_error
from runtime.logs import JsonFormatter
from runtime.redaction import MASK, RedactingFilter, redact

ROOT = Path(__file__).resolve().parents[3]
SCD = Path(sys.executable).with_name("scd")
TOKEN = "tok-Zq8v1Xw3Lm5Np7Rt"
SASL_PASSWORD = "sasl-Hq2Wc9Jf4Kd6"
S3_SECRET = "s3-Vb7Ny3Gt5Pe1Qs"
SECRETS = (TOKEN, SASL_PASSWORD, S3_SECRET)
# SASL switched on without a mechanism or user: refused, with the password in the input.
BAD_SASL = {
    "SCD_JOURNAL_SECURITY__PROTOCOL": "SASL_SSL",
    "SCD_JOURNAL_SECURITY__SASL_PASSWORD": SASL_PASSWORD,
}


def run(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SCD_")}
    return subprocess.run(
        command,
        env={**clean, "PYTHONPATH": str(ROOT), **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("env", "named"),
    [
        pytest.param(
            {"SCD_PUBLISHER_API_TOKEN": TOKEN, "SCD_PUBLISHER_PORT": "http", **BAD_SASL},
            "SCD_PUBLISHER_PORT",
            id="bad-port-beside-token",
        ),
        pytest.param(
            {"SCD_PUBLISHER_API_TOKEN": TOKEN, **BAD_SASL},
            "SCD_JOURNAL_SECURITY",
            id="incomplete-sasl",
        ),
        pytest.param(
            {"SCD_PUBLISHER_API_TOKEN": TOKEN[:12]}, "SCD_PUBLISHER_API_TOKEN", id="short-token"
        ),
        pytest.param(
            {
                "SCD_PUBLISHER_API_TOKEN": TOKEN,
                "SCD_BLOB_BACKEND": "s3",
                "SCD_BLOB_SECRET_KEY": S3_SECRET,
            },
            "SCD_BLOB_ACCESS_KEY",
            id="s3-secret-without-access-key",
        ),
    ],
)
def test_python_m_publisher_names_the_bad_setting_never_a_secret(
    env: dict[str, str], named: str, tmp_path: Path
) -> None:
    done = run([sys.executable, "-m", "scd", "publisher"], env, tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert named in done.stderr
    for secret in (*SECRETS, TOKEN[:12]):
        assert secret not in output
    assert "input_value" not in output


@pytest.mark.parametrize("command", [["publisher"], ["subscriber"]])
def test_scd_daemons_name_the_bad_setting_never_a_secret(
    command: list[str], tmp_path: Path
) -> None:
    env = {"SCD_PUBLISHER_API_TOKEN": TOKEN, **BAD_SASL, "SCD_BLOB_SECRET_KEY": S3_SECRET}
    done = run([str(SCD), *command], env, tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "SCD_JOURNAL_SECURITY" in done.stderr
    assert "sasl_mechanism" in done.stderr
    for secret in SECRETS:
        assert secret not in output


class EchoingSettings(ScdSettings):
    """A settings model whose validator (carelessly) quotes the secret it refuses."""

    config_section = "publisher"
    model_config = SettingsConfigDict(env_prefix="SCD_TEST_ECHO_", extra="forbid")

    signing_key: SecretStr

    @model_validator(mode="after")
    def _check(self) -> Self:
        key = self.signing_key.get_secret_value()
        raise ValueError(f"SCD_TEST_ECHO_SIGNING_KEY {key} is not a valid key")


def test_a_validator_quoting_a_secret_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCD_TEST_ECHO_SIGNING_KEY", "key-Mz4Rb8Tc2Wf6")
    with pytest.raises(ValidationError) as info:
        EchoingSettings()  # type: ignore[call-arg]  # from the environment
    assert "key-Mz4Rb8Tc2Wf6" in str(info.value)  # what pydantic alone would have printed
    described = describe_settings_error(info.value)
    assert "key-Mz4Rb8Tc2Wf6" not in described
    assert (
        described
        == f"invalid setting SCD_TEST_ECHO_*: SCD_TEST_ECHO_SIGNING_KEY {MASK} is not a valid key"
    )


def test_every_error_is_named_by_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCD_JOURNAL_SECURITY__PROTOCOL", "CARRIER_PIGEON")
    monkeypatch.setenv("SCD_JOURNAL_SEND_TIMEOUT_S", "-1")
    with pytest.raises(ValidationError) as info:
        JournalSettings()
    described = describe_settings_error(info.value)
    assert described.startswith("invalid setting ")
    assert "\n" not in described
    assert "SCD_JOURNAL_SECURITY__PROTOCOL: Input should be 'PLAINTEXT'" in described
    assert "SCD_JOURNAL_SEND_TIMEOUT_S: Input should be greater than 0" in described
    assert "CARRIER_PIGEON" not in described  # the value given is never echoed


@pytest.fixture
def log_stream() -> Iterator[tuple[logging.Logger, io.StringIO, logging.Handler]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("tests.redaction")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    yield logger, stream, handler
    logger.removeHandler(handler)
    logger.propagate = True


def test_loaded_settings_secrets_are_masked_in_log_lines_and_tracebacks(
    log_stream: tuple[logging.Logger, io.StringIO, logging.Handler],
) -> None:
    logger, stream, handler = log_stream
    secret = "loaded-Jx5Kv9Pw2Qa7"
    PublisherSettings(api_token=SecretStr(secret))  # loading registers the secret
    assert redact(f"Bearer {secret}") == f"Bearer {MASK}"
    logger.info("client config %s", {"sasl.password": secret})
    try:
        raise RuntimeError(f"connect to https://user:{secret}@host failed")
    except RuntimeError:
        logger.exception("startup failed")
    handler.setFormatter(JsonFormatter())
    try:
        raise RuntimeError(f"again {secret}")
    except RuntimeError:
        logger.exception("json line with %s", secret)
    text = stream.getvalue()
    assert secret not in text
    assert text.count(MASK) >= 4
    assert "Traceback" in text
    last = json.loads(text.strip().splitlines()[-1])
    assert last["message"] == f"json line with {MASK}"
    assert MASK in last["exception"]
