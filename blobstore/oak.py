"""Oak data store references: what FileVault writes as ``{BinaryRef}<reference>`` for a binary
it leaves out of a binary-less package, and where scd finds that binary's bytes.

An Oak data store (Jackrabbit's FileDataStore, or an AbstractSharedBackend store such as
S3DataStore) names a record by its content identity, the lowercase hex digest of its bytes
(SHA-256 by default, ``ds.digest.algorithm``; older stores used SHA-1), and hands out the
reference ``<identifier>:<hmac>``: the hex HMAC-SHA1 of the identifier's UTF-8 bytes under the
data store's reference key (a FileDataStore keeps it in ``<path>/reference.key``, a shared
backend as its ``reference.key`` metadata record). A reference thus proves it came from a
repository holding the key; the identifier alone locates the bytes.

Layouts scd reads (``SCD_OAK_LAYOUT``):

* ``file``: a FileDataStore directory shared with the subscriber (``SCD_OAK_FILE_ROOT``); a
  record lies at ``<root>/<id[0:2]>/<id[2:4]>/<id[4:6]>/<id>``.
* ``s3``: an S3DataStore in the bucket scd's blob store uses; a record is the object
  ``<prefix><id[0:4]>-<id[4:]>`` (``SCD_OAK_S3_PREFIX``, empty for a data store at the bucket's
  root).

Nothing here trusts the reference text: it is parsed to a strict form (hex identifier of a
known digest length, hex HMAC) before it names any file or key, so no reference can point
outside the data store.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Self

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from blobstore.errors import ForgedReference, MalformedReference
from runtime.config import ScdSettings
from runtime.errors import ConfigError

log = logging.getLogger(__name__)

# Longest reference accepted: a SHA-512 identifier (128) + ':' + a SHA-1 HMAC (40) fits; a
# longer text is refused before any parsing.
MAX_REFERENCE_CHARS = 200
# Identifier lengths (hex digits) by digest: what ds.digest.algorithm can make of a record.
DIGESTS = {40: "sha1", 64: "sha256", 128: "sha512"}
HMAC_HEX_CHARS = 40  # HmacSHA1, the only MAC Oak's data stores sign references with
_HEX = re.compile(r"[0-9a-f]+")
# Bounds of a configured reference key (a FileDataStore makes 256 random bytes).
MIN_KEY_BYTES = 16
MAX_KEY_BYTES = 4096


@dataclass(frozen=True)
class OakReference:
    identifier: str  # lowercase hex content identity
    mac: str  # lowercase hex HMAC-SHA1 of the identifier

    @property
    def digest(self) -> str:
        """hashlib's name of the digest the identifier is (sha256 for Oak's default)."""
        return DIGESTS[len(self.identifier)]


def _shown(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:80] + "...")


def parse_reference(text: str) -> OakReference:
    """``text`` as an Oak reference, or MalformedReference saying what is wrong with it."""
    if len(text) > MAX_REFERENCE_CHARS:
        raise MalformedReference(
            f"Oak reference of {len(text)} characters (at most {MAX_REFERENCE_CHARS}): "
            f"{_shown(text)}"
        )
    identifier, colon, mac = text.partition(":")
    if not colon:
        raise MalformedReference(f"Oak reference without ':<hmac>': {_shown(text)}")
    if len(identifier) not in DIGESTS or not _HEX.fullmatch(identifier):
        raise MalformedReference(
            f"Oak reference whose identifier is not a lowercase hex SHA-1, SHA-256 or "
            f"SHA-512 digest: {_shown(text)}"
        )
    if len(mac) != HMAC_HEX_CHARS or not _HEX.fullmatch(mac):
        raise MalformedReference(
            f"Oak reference whose HMAC is not {HMAC_HEX_CHARS} lowercase hex digits: {_shown(text)}"
        )
    return OakReference(identifier, mac)


def reference_mac(key: bytes, identifier: str) -> str:
    """The HMAC an Oak data store holding ``key`` appends to ``identifier``."""
    return hmac.new(key, identifier.encode("utf-8"), hashlib.sha1).hexdigest()


def check_mac(reference: OakReference, key: bytes) -> None:
    if not hmac.compare_digest(reference_mac(key, reference.identifier), reference.mac):
        raise ForgedReference(
            f"Oak reference {reference.identifier}:{reference.mac}: its HMAC does not match "
            "the configured reference key (SCD_OAK_REFERENCE_KEY or _KEY_FILE): it was not "
            "made by this data store, or the key is another data store's"
        )


def file_path(root: Path, identifier: str) -> Path:
    """Where a FileDataStore rooted at ``root`` keeps the record ``identifier``."""
    return root / identifier[0:2] / identifier[2:4] / identifier[4:6] / identifier


def s3_key(prefix: str, identifier: str) -> str:
    """The object key of the record ``identifier`` of an S3DataStore (Oak's S3 backend)."""
    return f"{prefix}{identifier[:4]}-{identifier[4:]}"


class OakDataStoreSettings(ScdSettings):
    """The Oak data store that FileVault packages' binary references point into."""

    config_section = "oak"

    model_config = SettingsConfigDict(env_prefix="SCD_OAK_", extra="forbid")

    layout: Literal["none", "file", "s3"] = Field(
        default="none",
        description="How the subscriber reaches the Oak data store of a FileVault package's "
        "`{BinaryRef}` references: `file` (a FileDataStore directory shared with the "
        "subscriber, `SCD_OAK_FILE_ROOT`), `s3` (an S3DataStore in scd's blob store bucket), "
        "`none` (references are imported unresolved, as the blob key "
        "`filevault-ref/<reference>`, and their binaries cannot be read)",
    )
    file_root: Path | None = Field(
        default=None,
        description="`file` layout: the FileDataStore's directory (its `path`), read only; "
        "a record is copied from it into scd's blob store when its package is imported",
    )
    s3_prefix: str = Field(
        default="",
        max_length=200,
        json_schema_extra={"doc_default": "empty"},
        description="`s3` layout: the key prefix of the S3DataStore's records in scd's bucket "
        "(empty: the data store is the bucket's root)",
    )
    reference_key: SecretStr | None = Field(
        default=None,
        description="The data store's reference key, base64 (Oak's `referenceKeyEncoded`; for a "
        "FileDataStore `base64 -w0 <path>/reference.key`): a reference whose HMAC does not "
        "match fails its package for good. Unset (and no `SCD_OAK_REFERENCE_KEY_FILE`): HMACs are "
        "not checked, only their form",
    )
    reference_key_file: Path | None = Field(
        default=None,
        description="A file holding the reference key's raw bytes, e.g. the FileDataStore's own "
        "`<path>/reference.key` (read once at start); exclusive with `SCD_OAK_REFERENCE_KEY`",
    )

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.layout == "file" and self.file_root is None:
            raise ValueError("SCD_OAK_FILE_ROOT must be set when SCD_OAK_LAYOUT=file")
        if self.reference_key is not None and self.reference_key_file is not None:
            raise ValueError("set SCD_OAK_REFERENCE_KEY or SCD_OAK_REFERENCE_KEY_FILE, not both")
        if self.reference_key is not None:
            _check_key(_decode_key(self.reference_key.get_secret_value()))
        return self

    def key(self) -> bytes | None:
        """The reference key configured, or None."""
        if self.reference_key is not None:
            return _decode_key(self.reference_key.get_secret_value())
        if self.reference_key_file is not None:
            return _check_key(self.reference_key_file.read_bytes())
        return None


def _decode_key(text: str) -> bytes:
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("SCD_OAK_REFERENCE_KEY is not base64") from None


def _check_key(key: bytes) -> bytes:
    if not MIN_KEY_BYTES <= len(key) <= MAX_KEY_BYTES:
        raise ValueError(
            f"the Oak reference key has {len(key)} bytes; expected {MIN_KEY_BYTES} to "
            f"{MAX_KEY_BYTES} (a FileDataStore's reference.key has 256)"
        )
    return key


@dataclass(frozen=True)
class OakDataStore:
    """Where an Oak reference's bytes are, and the key that checks its HMAC."""

    layout: Literal["file", "s3"]
    key: bytes | None
    file_root: Path | None = None
    s3_prefix: str = ""

    @classmethod
    def from_settings(cls, settings: OakDataStoreSettings) -> OakDataStore | None:
        if settings.layout == "none":
            return None
        try:
            key = settings.key()
        except (OSError, ValueError) as exc:
            raise ConfigError(f"SCD_OAK_REFERENCE_KEY_FILE: {exc}") from None
        if key is None:
            log.warning(
                "no Oak reference key configured (SCD_OAK_REFERENCE_KEY): the HMAC of a "
                "FileVault binary reference is not checked, only its form"
            )
        return cls(settings.layout, key, settings.file_root, settings.s3_prefix)

    def reference(self, text: str) -> OakReference:
        """``text`` parsed, and its HMAC checked when a key is configured."""
        reference = parse_reference(text)
        if self.key is not None:
            check_mac(reference, self.key)
        return reference
