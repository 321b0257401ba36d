"""Signed records: Ed25519 signatures on package and command records.

A publisher with a signing key adds two headers to each package and command record it sends:
``sig-key`` (the key id) and ``sig`` (base64 of the 64-byte Ed25519 signature). A subscriber
with public keys configured verifies them before it trusts a record; several public keys are
accepted at once so that the publisher's key can be rotated without a gap.

What is signed is ``SIGNATURE_CONTEXT`` followed by five length-prefixed fields: the key id,
the topic, the ``type`` header, the ``version`` header and the record's value. Binding the
type and topic means a signed command cannot pass as a package (or the reverse), nor a record
copied to another topic; binding the key id means a signature counts only for the key it names.
A Sling JSON record (journal/wire/sling_json.py) binds two fields more, its
``messageType`` and ``scd-ext`` headers (empty when absent; scd's extensions, sequence numbers
among them, travel there), under a context of its own. The length prefixes and the contexts
make the encoding unambiguous: no two different records sign the same bytes. Not bound: the
record key (partitioning only; a command names its subscriber inside the value) and the offset
(unknown when signing), so a signed record re-sent verbatim on the same topic still verifies.

Keys are given as a PEM file path, or as ``base64:`` followed by the raw 32-byte key (for
environment variables). Public keys for verification are ``key_id=key`` pairs separated by
commas. ``scd keys generate`` (journal/keys.py) writes a key pair in the PEM form.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key, load_pem_public_key
from pydantic import SecretStr

from journal.errors import BadSignature, UnknownSigningKey, UnsignedRecord
from journal.wire.headers import EXT_HEADER, MESSAGE_TYPE_HEADER, TYPE_HEADER, VERSION_HEADER
from runtime.errors import ConfigError

SIG_KEY_HEADER = "sig-key"
SIG_HEADER = "sig"
# Versioned domain separation: these bytes are never signed by anything but a v1 record
# signature, so a signature made for another purpose with the same key cannot pass as one.
SIGNATURE_CONTEXT = b"scd-sig-v1\0"
SIGNATURE_CONTEXT_JSON = b"scd-sig-v1-json\0"
# Key ids travel in every signed record and appear in logs: short, printable, no separators.
KEY_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_KEY_ID_CHARS = 64
# An Ed25519 signature is 64 bytes: exactly 88 characters of padded base64.
SIGNATURE_BYTES = 64
SIGNATURE_B64_CHARS = 88
RAW_KEY_BYTES = 32
BASE64_PREFIX = "base64:"
# Largest PEM key file read: an Ed25519 key in PEM is about 120 bytes; anything much larger is
# not a key, and reading it whole is pointless.
MAX_KEY_FILE_BYTES = 64 * 1024


def valid_key_id(key_id: str) -> bool:
    return KEY_ID_PATTERN.fullmatch(key_id) is not None


def _check_key_id(key_id: str) -> None:
    if not valid_key_id(key_id):
        raise ValueError(
            f"invalid signing key id {key_id[:MAX_KEY_ID_CHARS]!r}: 1-{MAX_KEY_ID_CHARS} "
            "characters of A-Z a-z 0-9 . _ -, starting with a letter or digit"
        )


def signed_bytes(key_id: str, topic: str, headers: Mapping[str, str], value: bytes) -> bytes:
    """The canonical bytes a record signature covers (see the module docstring)."""
    fields = [
        key_id.encode(),
        topic.encode(),
        headers.get(TYPE_HEADER, "").encode(),
        headers.get(VERSION_HEADER, "").encode(),
        value,
    ]
    context = SIGNATURE_CONTEXT
    if MESSAGE_TYPE_HEADER in headers:
        context = SIGNATURE_CONTEXT_JSON
        fields += [headers[MESSAGE_TYPE_HEADER].encode(), headers.get(EXT_HEADER, "").encode()]
    return context + b"".join(struct.pack(">I", len(f)) + f for f in fields)


class RecordSigner:
    """Signs records with one private key, named by ``key_id`` in each record."""

    def __init__(self, key_id: str, private_key: Ed25519PrivateKey) -> None:
        _check_key_id(key_id)
        self.key_id = key_id
        self._key = private_key

    def sign(self, topic: str, headers: Mapping[str, str], value: bytes) -> dict[str, str]:
        """The headers to add to a record of ``topic`` with ``headers`` and ``value``."""
        signature = self._key.sign(signed_bytes(self.key_id, topic, headers, value))
        return {SIG_KEY_HEADER: self.key_id, SIG_HEADER: base64.b64encode(signature).decode()}

    def signed_headers(
        self, topic: str, headers: Mapping[str, str], value: bytes
    ) -> dict[str, str]:
        """``headers`` with the signature headers added (replacing any already there)."""
        return {**headers, **self.sign(topic, headers, value)}

    def verifier(self) -> RecordVerifier:
        """A verifier of this signer's own records (its public key only)."""
        return RecordVerifier({self.key_id: self._key.public_key()})

    def __repr__(self) -> str:
        return f"RecordSigner(key_id={self.key_id!r})"


class RecordVerifier:
    """Verifies record signatures against the accepted public keys (several during rotation)."""

    def __init__(self, public_keys: Mapping[str, Ed25519PublicKey]) -> None:
        if not public_keys:
            raise ValueError("a record verifier needs at least one public key")
        for key_id in public_keys:
            _check_key_id(key_id)
        self._keys = dict(public_keys)

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(sorted(self._keys))

    def verify(self, topic: str, headers: Mapping[str, str], value: bytes) -> str:
        """Check a record read from ``topic``; returns the id of the key that signed it.

        Raises UnsignedRecord, UnknownSigningKey or BadSignature (all SignatureError).
        """
        key_id = headers.get(SIG_KEY_HEADER)
        encoded = headers.get(SIG_HEADER)
        if key_id is None and encoded is None:
            raise UnsignedRecord(f"unsigned record on {topic!r}")
        if key_id is None:
            raise BadSignature(f"record on {topic!r} has a signature but no {SIG_KEY_HEADER!r}")
        if not valid_key_id(key_id):
            # Never echo a malformed id: it is attacker-chosen and may be huge or unprintable.
            raise BadSignature(f"record on {topic!r} has a malformed key id ({len(key_id)} chars)")
        if encoded is None:
            raise UnsignedRecord(f"record on {topic!r} names key {key_id!r} but has no signature")
        public_key = self._keys.get(key_id)
        if public_key is None:
            raise UnknownSigningKey(key_id)
        signature = _decode_signature(encoded)
        if signature is None:
            raise BadSignature(
                f"record on {topic!r} has a malformed signature for key {key_id!r} "
                f"({len(encoded)} chars, expected {SIGNATURE_B64_CHARS} of base64)"
            )
        try:
            public_key.verify(signature, signed_bytes(key_id, topic, headers, value))
        except InvalidSignature:
            raise BadSignature(
                f"record on {topic!r} does not match its signature by key {key_id!r}"
            ) from None
        return key_id

    def __repr__(self) -> str:
        return f"RecordVerifier(key_ids={list(self.key_ids)})"


def _decode_signature(encoded: str) -> bytes | None:
    # Length first: a huge header is refused before any decoding work.
    if len(encoded) != SIGNATURE_B64_CHARS:
        return None
    try:
        signature = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return None
    # Only the canonical encoding: the unused low bits of the last character would otherwise
    # give one signature several spellings.
    if len(signature) != SIGNATURE_BYTES or base64.b64encode(signature).decode() != encoded:
        return None
    return signature


# ---------------------------------------------------------------- loading keys


def _raw_key(source: str, setting: str) -> bytes:
    try:
        raw = base64.b64decode(source.removeprefix(BASE64_PREFIX).strip(), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != RAW_KEY_BYTES:
        # No detail from the value itself: it may be a private key.
        raise ConfigError(
            f"{setting}: a '{BASE64_PREFIX}' key must be base64 of {RAW_KEY_BYTES} raw bytes"
        )
    return raw


def _pem_file(source: str, setting: str, *, secret: bool) -> bytes:
    # A secret setting's value is never repeated: a raw key given without its prefix would
    # otherwise be printed as a file name.
    path = Path(source).expanduser()
    name = "the key file it names" if secret else f"key file {path}"
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_KEY_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(
            f"{setting}: cannot read {name} ({exc.strerror}); give a PEM file path or "
            f"'{BASE64_PREFIX}' and the raw key"
        ) from None
    if len(data) > MAX_KEY_FILE_BYTES:
        raise ConfigError(f"{setting}: {name} is too large to be a PEM key")
    return data


def load_private_key(source: str, setting: str) -> Ed25519PrivateKey:
    """An Ed25519 private key from a PEM file (PKCS#8, unencrypted) or ``base64:<raw>``;
    ConfigError naming ``setting`` (never the key, nor the value) when it is not one."""
    if source.startswith(BASE64_PREFIX):
        return Ed25519PrivateKey.from_private_bytes(_raw_key(source, setting))
    data = _pem_file(source, setting, secret=True)
    try:
        key = load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise ConfigError(
            f"{setting}: the file it names is not an unencrypted PEM private key"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(f"{setting}: the file it names is not an Ed25519 private key")
    return key


def load_public_key(source: str, setting: str) -> Ed25519PublicKey:
    """An Ed25519 public key from a PEM file or ``base64:<raw 32 bytes>``."""
    if source.startswith(BASE64_PREFIX):
        return Ed25519PublicKey.from_public_bytes(_raw_key(source, setting))
    data = _pem_file(source, setting, secret=False)
    try:
        key = load_pem_public_key(data)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise ConfigError(f"{setting}: {source} is not a PEM public key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise ConfigError(f"{setting}: {source} is not an Ed25519 public key")
    return key


def parse_key_list(text: str) -> dict[str, str]:
    """``"old=/etc/scd/old.pub, new=base64:..."`` -> ``{"old": ..., "new": ...}``; ValueError
    on a malformed pair, an invalid key id or an id given twice."""
    keys: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        key_id, sep, source = (s.strip() for s in item.partition("="))
        if not sep or not source:
            raise ValueError(f"expected key_id=key pairs separated by commas, got {item!r}")
        _check_key_id(key_id)
        if key_id in keys:
            raise ValueError(f"key id {key_id!r} is given twice")
        keys[key_id] = source
    return keys


def check_key_ids(keys: Mapping[str, str]) -> dict[str, str]:
    """Validate the ids of a key mapping (from a TOML table); ValueError names a bad one."""
    for key_id in keys:
        _check_key_id(key_id)
    return dict(keys)


class SigningSettings(Protocol):
    """What ``signer_from_settings`` reads (publisher/settings.py)."""

    @property
    def signing_key(self) -> SecretStr | None: ...

    @property
    def signing_key_id(self) -> str | None: ...


class VerifySettings(Protocol):
    """What ``verifier_from_settings`` reads (subscriber/settings.py)."""

    @property
    def verify_keys(self) -> Mapping[str, str]: ...


def signer_from_settings(
    settings: SigningSettings, setting: str = "SCD_PUBLISHER_SIGNING_KEY"
) -> RecordSigner | None:
    """The publisher's signer, or None when no signing key is configured; ConfigError when the
    key cannot be loaded."""
    if settings.signing_key is None:
        return None
    if settings.signing_key_id is None:
        raise ConfigError(f"{setting} needs {setting}_ID (the key id sent with each record)")
    key = load_private_key(settings.signing_key.get_secret_value(), setting)
    return RecordSigner(settings.signing_key_id, key)


def verifier_from_settings(
    settings: VerifySettings, setting: str = "SCD_SUBSCRIBER_VERIFY_KEYS"
) -> RecordVerifier | None:
    """The subscriber's verifier, or None when no public key is configured (records are then
    not checked); ConfigError naming the key id when a key cannot be loaded."""
    if not settings.verify_keys:
        return None
    keys = {
        key_id: load_public_key(source, f"{setting} ({key_id})")
        for key_id, source in settings.verify_keys.items()
    }
    return RecordVerifier(keys)
