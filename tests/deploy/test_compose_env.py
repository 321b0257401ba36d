"""``deploy/compose.sh env`` gives a client on the host what ``scd content`` needs to read a
subscriber's store of the compose cluster: the blob store the services use (backend, bucket,
keys), a store of the compose file, and from them delta-rs' S3 options for the published S3
port. Run on a copy of the script beside an ``.env`` of its own (no engine needed)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from blobstore.settings import BlobStoreSettings
from subscriber.settings import SubscriberSettings
from subscriber.tree_reader import storage_options

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DOTENV = {
    "SCD_COMPOSE_API_TOKEN": "token-of-the-test-0123456789",
    "SCD_COMPOSE_S3_ACCESS_KEY": "scdtest",
    "SCD_COMPOSE_S3_SECRET_KEY": "secret-of-the-test",
    "SCD_COMPOSE_S3_PORT": "29123",
}


def printed(tmp_path: Path) -> dict[str, str]:
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    for script in ("compose.sh", "common.sh"):
        shutil.copy(DEPLOY / script, deploy / script)
    (deploy / ".env").write_text("".join(f"{k}={v}\n" for k, v in DOTENV.items()))
    out = subprocess.run(
        ["bash", str(deploy / "compose.sh"), "env"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    values = {}
    for line in out.splitlines():
        words = shlex.split(line)
        assert words[0] == "export", line
        name, _, value = words[1].partition("=")
        values[name] = value
    return values


def test_env_prints_the_blob_store_and_a_store_of_the_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = printed(tmp_path)
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    services_env = compose["services"]["subscriber-1"]["environment"]
    for name in ("SCD_BLOB_BACKEND", "SCD_BLOB_BUCKET", "SCD_BLOB_REGION"):
        assert values[name] == services_env[name], name
    assert values["SCD_SUBSCRIBER_STORE_PATH"] == services_env["SCD_SUBSCRIBER_STORE_PATH"]
    assert values["SCD_BLOB_ACCESS_KEY"] == DOTENV["SCD_COMPOSE_S3_ACCESS_KEY"]

    for name in [n for n in os.environ if n.startswith("SCD_")]:
        monkeypatch.delenv(name)
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    settings = SubscriberSettings()  # what scd content reads, from these variables alone
    assert isinstance(settings.blobstore, BlobStoreSettings)
    options = storage_options(settings.store_path, settings.blobstore)
    assert options["aws_endpoint_url"] == f"http://127.0.0.1:{DOTENV['SCD_COMPOSE_S3_PORT']}"
    assert options["aws_allow_http"] == "true"
    assert options["aws_virtual_hosted_style_request"] == "false"
    assert options["aws_access_key_id"] == DOTENV["SCD_COMPOSE_S3_ACCESS_KEY"]
    assert options["aws_secret_access_key"] == DOTENV["SCD_COMPOSE_S3_SECRET_KEY"]
