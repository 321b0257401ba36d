"""Blob store settings: environment variables and validation messages."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from blobstore import BlobStoreSettings


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCD_BLOB_BACKEND", "s3")
    monkeypatch.setenv("SCD_BLOB_ENDPOINT_URL", "http://s3.local:9000")
    monkeypatch.setenv("SCD_BLOB_BUCKET", "content")
    monkeypatch.setenv("SCD_BLOB_ACCESS_KEY", "scd")
    monkeypatch.setenv("SCD_BLOB_SECRET_KEY", "very-secret")
    monkeypatch.setenv("SCD_BLOB_MULTIPART_THRESHOLD_BYTES", str(16 * 1024 * 1024))
    settings = BlobStoreSettings()
    assert (settings.backend, settings.endpoint_url, settings.bucket) == (
        "s3",
        "http://s3.local:9000",
        "content",
    )
    assert settings.secret_key is not None
    assert settings.secret_key.get_secret_value() == "very-secret"
    assert "very-secret" not in repr(settings)
    assert settings.multipart_threshold_bytes == 16 * 1024 * 1024


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"backend": "local"}, "SCD_BLOB_LOCAL_ROOT"),
        ({"backend": "s3", "access_key": "k"}, "SCD_BLOB_SECRET_KEY"),
        ({"backend": "s3", "bucket": "Bad_Bucket"}, "bucket"),
        ({"backend": "s3", "multipart_chunk_bytes": 1024}, "multipart_chunk_bytes"),
        ({"backend": "s3", "max_attempts": 0}, "max_attempts"),
    ],
)
def test_invalid_settings_name_the_setting(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        BlobStoreSettings(**kwargs)  # type: ignore[arg-type]
