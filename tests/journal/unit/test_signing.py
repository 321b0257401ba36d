"""Signed records (journal/wire/signing.py): what a signature binds, what verification refuses,
key rotation, key loading and ``scd keys generate``."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from pydantic import SecretStr, ValidationError

from journal.api import Position, TopicSpec
from journal.errors import BadSignature, SignatureError, UnknownSigningKey, UnsignedRecord
from journal.messaging import MessageSender
from journal.sqlite.journal import SqliteJournal
from journal.wire import messages as m
from journal.wire.signing import (
    SIG_HEADER,
    SIG_KEY_HEADER,
    RecordSigner,
    RecordVerifier,
    load_private_key,
    parse_key_list,
    signer_from_settings,
    verifier_from_settings,
)
from publisher.settings import PublisherSettings
from runtime.errors import ConfigError, DecodeError
from scd.cli import main
from subscriber.settings import SubscriberSettings

TOPIC = "scd.command"


def command(offset: int = 7) -> m.CommandMessage:
    return m.CommandMessage(
        sub_sling_id="s",
        sub_agent_name="sub",
        pub_agent_name="publish",
        clear_command=m.ClearCommand(offset=offset),
    )


def signed(signer: RecordSigner, message: Any = None, topic: str = TOPIC) -> tuple[Any, bytes]:
    value, headers = m.encode(message if message is not None else command())
    return signer.signed_headers(topic, headers, value), value


def raw_b64(key: Ed25519PrivateKey) -> str:
    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return "base64:" + base64.b64encode(raw).decode()


@pytest.fixture
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


@pytest.fixture
def signer(key: Ed25519PrivateKey) -> RecordSigner:
    return RecordSigner("k1", key)


@pytest.fixture
def verifier(key: Ed25519PrivateKey) -> RecordVerifier:
    return RecordVerifier({"k1": key.public_key()})


def test_signed_record_roundtrips_through_the_sqlite_journal(
    tmp_path: Path, signer: RecordSigner, verifier: RecordVerifier
) -> None:
    with SqliteJournal(tmp_path / "j.db") as journal:
        journal.create_topics([TopicSpec(TOPIC)])
        MessageSender(journal, TOPIC, signer).send(command(), key="sub")
        MessageSender(journal, TOPIC).send(command())  # no signer: unsigned
        with journal.consumer(TOPIC, Position.earliest()) as consumer:
            first, second = consumer.poll(1.0)
    assert first.headers[SIG_KEY_HEADER] == "k1"
    assert len(first.headers[SIG_HEADER]) == 88
    assert verifier.verify(first.topic, first.headers, first.value) == "k1"
    assert m.decode(first.headers, first.value) == command()
    with pytest.raises(UnsignedRecord):
        verifier.verify(second.topic, second.headers, second.value)


def test_errors_are_permanent_decode_errors_naming_only_the_key_id(
    signer: RecordSigner, verifier: RecordVerifier
) -> None:
    headers, value = signed(signer)
    with pytest.raises(BadSignature) as caught:
        verifier.verify(TOPIC, headers, value + b"\x00")
    assert isinstance(caught.value, SignatureError)
    assert isinstance(caught.value, DecodeError)
    assert caught.value.retriable is False
    assert "'k1'" in str(caught.value)
    assert headers[SIG_HEADER] not in str(caught.value)


def test_forged_signature_is_refused(signer: RecordSigner, verifier: RecordVerifier) -> None:
    headers, value = signed(signer)
    headers[SIG_HEADER] = base64.b64encode(os.urandom(64)).decode()
    with pytest.raises(BadSignature, match="does not match"):
        verifier.verify(TOPIC, headers, value)


def test_signature_by_another_key_under_a_known_id_is_refused(verifier: RecordVerifier) -> None:
    headers, value = signed(RecordSigner("k1", Ed25519PrivateKey.generate()))
    with pytest.raises(BadSignature):
        verifier.verify(TOPIC, headers, value)


def test_signature_of_another_record_is_refused(
    signer: RecordSigner, verifier: RecordVerifier
) -> None:
    headers, _ = signed(signer, command(7))
    other_headers, other_value = signed(signer, command(8))
    verifier.verify(TOPIC, other_headers, other_value)
    with pytest.raises(BadSignature):
        verifier.verify(TOPIC, {**other_headers, SIG_HEADER: headers[SIG_HEADER]}, other_value)


@pytest.mark.parametrize(
    ("header", "swapped"),
    [("type", "PackageMessage"), ("type", "LogMessage"), ("version", "2")],
)
def test_swapped_type_or_version_header_is_refused(
    signer: RecordSigner, verifier: RecordVerifier, header: str, swapped: str
) -> None:
    headers, value = signed(signer)
    verifier.verify(TOPIC, headers, value)
    with pytest.raises(BadSignature):
        verifier.verify(TOPIC, {**headers, header: swapped}, value)
    without = {k: v for k, v in headers.items() if k != header}
    with pytest.raises(BadSignature):
        verifier.verify(TOPIC, without, value)


def test_record_moved_to_another_topic_is_refused(
    signer: RecordSigner, verifier: RecordVerifier
) -> None:
    headers, value = signed(signer)
    with pytest.raises(BadSignature):
        verifier.verify("scd.package", headers, value)


def test_key_id_is_bound_even_to_the_same_public_key(key: Ed25519PrivateKey) -> None:
    # Two ids for one key: a signature counts only for the id it was made under.
    verifier = RecordVerifier({"a": key.public_key(), "b": key.public_key()})
    headers, value = signed(RecordSigner("a", key))
    assert verifier.verify(TOPIC, headers, value) == "a"
    with pytest.raises(BadSignature):
        verifier.verify(TOPIC, {**headers, SIG_KEY_HEADER: "b"}, value)


def test_unsigned_and_half_signed_records(signer: RecordSigner, verifier: RecordVerifier) -> None:
    headers, value = signed(signer)
    plain = {k: v for k, v in headers.items() if k not in (SIG_HEADER, SIG_KEY_HEADER)}
    with pytest.raises(UnsignedRecord, match="unsigned"):
        verifier.verify(TOPIC, plain, value)
    with pytest.raises(UnsignedRecord, match="'k1' but has no signature"):
        verifier.verify(TOPIC, {**plain, SIG_KEY_HEADER: "k1"}, value)
    with pytest.raises(BadSignature, match="no 'sig-key'"):
        verifier.verify(TOPIC, {**plain, SIG_HEADER: headers[SIG_HEADER]}, value)


def test_unknown_key_id_is_named(verifier: RecordVerifier) -> None:
    headers, value = signed(RecordSigner("k9", Ed25519PrivateKey.generate()))
    with pytest.raises(UnknownSigningKey, match="'k9'") as caught:
        verifier.verify(TOPIC, headers, value)
    assert caught.value.key_id == "k9"


GOOD_SIG = base64.b64encode(b"\x01" * 64).decode()


@pytest.mark.parametrize(
    ("key_id", "sig"),
    [
        ("k1", "A" * 100_000),  # oversized
        ("k1", GOOD_SIG[:-1]),  # one char short
        ("k1", GOOD_SIG[:-2] + "!!"),  # not base64
        ("k1", base64.b64encode(b"\x01" * 66).decode()),  # 88 chars, 66 bytes
        ("k1", " " + GOOD_SIG[1:]),  # whitespace is not skipped
        ("k1", ""),
        ("x" * 65, GOOD_SIG),  # key id too long
        ("k1\nforged log line", GOOD_SIG),
        ("", GOOD_SIG),
        ("-k1", GOOD_SIG),
        ("k\u00e9", GOOD_SIG),
    ],
)
def test_malformed_headers_are_refused_without_echoing_them(
    signer: RecordSigner, verifier: RecordVerifier, key_id: str, sig: str
) -> None:
    headers, value = signed(signer)
    with pytest.raises(BadSignature) as caught:
        verifier.verify(TOPIC, {**headers, SIG_KEY_HEADER: key_id, SIG_HEADER: sig}, value)
    message = str(caught.value)
    assert len(message) < 200
    assert "\n" not in message
    if key_id != "k1":
        assert "malformed key id" in message


def test_only_the_canonical_base64_of_a_signature_is_accepted(
    signer: RecordSigner, verifier: RecordVerifier
) -> None:
    headers, value = signed(signer)
    sig = headers[SIG_HEADER]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    # The character before "==" carries 4 unused bits: flipping one keeps the same bytes.
    respelled = sig[:-3] + alphabet[alphabet.index(sig[-3]) ^ 1] + "=="
    assert base64.b64decode(respelled) == base64.b64decode(sig)
    with pytest.raises(BadSignature, match="malformed signature"):
        verifier.verify(TOPIC, {**headers, SIG_HEADER: respelled}, value)


def test_key_rotation(key: Ed25519PrivateKey) -> None:
    new_key = Ed25519PrivateKey.generate()
    old, new = RecordSigner("2024", key), RecordSigner("2025", new_key)
    by_old, by_new = signed(old), signed(new)
    both = RecordVerifier({"2024": key.public_key(), "2025": new_key.public_key()})
    assert both.verify(TOPIC, *by_old) == "2024"
    assert both.verify(TOPIC, *by_new) == "2025"
    retired = RecordVerifier({"2025": new_key.public_key()})
    assert retired.verify(TOPIC, *by_new) == "2025"
    with pytest.raises(UnknownSigningKey):
        retired.verify(TOPIC, *by_old)


def test_no_key_material_in_reprs(key: Ed25519PrivateKey, signer: RecordSigner) -> None:
    raw = key.private_bytes_raw()
    for text in (repr(signer), repr(RecordVerifier({"k1": key.public_key()}))):
        assert "k1" in text
        assert base64.b64encode(raw).decode() not in text
        assert raw.hex() not in text


def test_bad_key_ids_are_refused_when_building() -> None:
    key = Ed25519PrivateKey.generate()
    with pytest.raises(ValueError, match="invalid signing key id"):
        RecordSigner("has space", key)
    with pytest.raises(ValueError, match="at least one"):
        RecordVerifier({})


# ---------------------------------------------------------------- keys and settings


def test_generate_writes_a_usable_key_pair_and_never_overwrites(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["keys", "generate", "--key-id", "site-2025", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    private, public = tmp_path / "site-2025.key", tmp_path / "site-2025.pub"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert private.read_text() not in out
    assert "PRIVATE" not in out
    settings = PublisherSettings(
        dev_mode=True, signing_key=SecretStr(str(private)), signing_key_id="site-2025"
    )
    signer = signer_from_settings(settings)
    assert signer is not None
    # Both printed forms of the public key verify: the PEM file and the base64 line.
    line = next(x for x in out.splitlines() if "SCD_SUBSCRIBER_VERIFY_KEYS=" in x)
    for spec in (line.split("SCD_SUBSCRIBER_VERIFY_KEYS=", 1)[1], f"site-2025={public}"):
        monkeypatch.setenv("SCD_SUBSCRIBER_VERIFY_KEYS", spec)
        verifier = verifier_from_settings(SubscriberSettings())
        assert verifier is not None
        assert verifier.verify(TOPIC, *signed(signer)) == "site-2025"

    before = private.read_bytes()
    assert main(["keys", "generate", "--key-id", "site-2025", "--out", str(tmp_path)]) == 1
    assert "exists already" in capsys.readouterr().err
    assert private.read_bytes() == before
    assert main(["keys", "generate", "--key-id", "../x", "--out", str(tmp_path)]) == 2


def test_private_key_errors_name_the_setting_never_the_value(
    tmp_path: Path, key: Ed25519PrivateKey
) -> None:
    raw = base64.b64encode(key.private_bytes_raw()).decode()
    for value in (raw, "base64:" + raw[:-4], str(tmp_path)):  # a raw key without its prefix
        with pytest.raises(ConfigError, match="SCD_PUBLISHER_SIGNING_KEY") as caught:
            load_private_key(value, "SCD_PUBLISHER_SIGNING_KEY")
        assert raw[:20] not in str(caught.value)
        assert str(tmp_path) not in str(caught.value)
    pub = tmp_path / "k.pub"
    pub.write_bytes(key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
    with pytest.raises(ConfigError, match="not an unencrypted PEM private key"):
        load_private_key(str(pub), "SCD_PUBLISHER_SIGNING_KEY")
    loaded = load_private_key("base64:" + raw, "X")
    assert loaded.private_bytes_raw() == key.private_bytes_raw()


def test_publisher_signing_settings_keep_the_key_secret(key: Ed25519PrivateKey) -> None:
    secret = "base64:" + base64.b64encode(key.private_bytes_raw()).decode()
    with pytest.raises(ValidationError) as caught:
        PublisherSettings.model_validate({"dev_mode": True, "signing_key": secret})
    assert "SIGNING_KEY_ID" in str(caught.value)
    assert secret[7:30] not in str(caught.value)
    with pytest.raises(ValidationError):
        PublisherSettings(dev_mode=True, signing_key=SecretStr(secret), signing_key_id="bad id")
    settings = PublisherSettings.model_validate(
        {"dev_mode": True, "signing_key": secret, "signing_key_id": "k1"}
    )
    assert secret[7:30] not in repr(settings)
    assert secret[7:30] not in str(settings.model_dump())
    assert signer_from_settings(settings) is not None
    assert signer_from_settings(PublisherSettings(dev_mode=True)) is None


def test_subscriber_verify_keys_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: Ed25519PrivateKey
) -> None:
    assert SubscriberSettings().verify_keys == {}
    assert verifier_from_settings(SubscriberSettings()) is None
    new = Ed25519PrivateKey.generate()
    monkeypatch.setenv("SCD_SUBSCRIBER_VERIFY_KEYS", f" old={raw_b64(key)} , new={raw_b64(new)},")
    verifier = verifier_from_settings(SubscriberSettings())
    assert verifier is not None
    assert verifier.key_ids == ("new", "old")
    for bad in ("old", "old=", "a b=base64:x", f"k={raw_b64(key)},k={raw_b64(new)}"):
        monkeypatch.setenv("SCD_SUBSCRIBER_VERIFY_KEYS", bad)
        with pytest.raises(ValidationError, match="verify_keys"):
            SubscriberSettings()
    monkeypatch.setenv("SCD_SUBSCRIBER_VERIFY_KEYS", f"gone={tmp_path / 'gone.pub'}")
    with pytest.raises(ConfigError, match=r"SCD_SUBSCRIBER_VERIFY_KEYS \(gone\).*gone.pub"):
        verifier_from_settings(SubscriberSettings())
    monkeypatch.setenv("SCD_SUBSCRIBER_VERIFY_KEYS", "short=base64:AAAA")
    with pytest.raises(ConfigError, match="32 raw bytes"):
        verifier_from_settings(SubscriberSettings())
    # A TOML table gives the same mapping.
    settings = SubscriberSettings.model_validate({"verify_keys": {"t": raw_b64(key)}})
    assert settings.verify_keys == {"t": raw_b64(key)}
    assert parse_key_list("a=/x.pub") == {"a": "/x.pub"}
