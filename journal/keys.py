"""``scd keys generate``: an Ed25519 key pair for signed records (journal/wire/signing.py).

Writes ``<key_id>.key`` (PKCS#8 PEM, readable by its owner only: the publisher's
``SCD_PUBLISHER_SIGNING_KEY``) and ``<key_id>.pub`` (PEM: for the subscribers'
``SCD_SUBSCRIBER_VERIFY_KEYS``), and prints the settings that use them. Existing files are
never overwritten: a key that is replaced by accident cannot be recovered.
"""

from __future__ import annotations

import argparse
import base64
import os
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

from journal.wire.signing import BASE64_PREFIX, MAX_KEY_ID_CHARS, valid_key_id
from runtime.errors import ConfigError, ScdError


def _write_new(path: Path, data: bytes, mode: int) -> None:
    # O_EXCL: refuse to replace a key; the mode applies from creation, so the private key is
    # never readable by others, not even for a moment.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        raise ScdError(f"{path} exists already; choose another key id or directory") from None
    except OSError as exc:
        raise ScdError(f"cannot create {path}: {exc.strerror}") from None
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def generate(key_id: str, out: Path) -> tuple[Path, Path, str]:
    """Write a new key pair; returns the private and public key files and the public key as
    ``base64:<raw>``."""
    if not valid_key_id(key_id):
        raise ConfigError(
            f"invalid key id {key_id[:MAX_KEY_ID_CHARS]!r}: 1-{MAX_KEY_ID_CHARS} characters "
            "of A-Z a-z 0-9 . _ -, starting with a letter or digit"
        )
    out.mkdir(parents=True, exist_ok=True)
    private_path, public_path = out / f"{key_id}.key", out / f"{key_id}.pub"
    if public_path.exists():  # checked first so that no lone private key is left behind
        raise ScdError(f"{public_path} exists already; choose another key id or directory")
    key = Ed25519PrivateKey.generate()
    public = key.public_key()
    _write_new(
        private_path,
        key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()),
        0o600,
    )
    _write_new(
        public_path, public.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo), 0o644
    )
    raw = public.public_bytes(Encoding.Raw, PublicFormat.Raw)
    return private_path, public_path, BASE64_PREFIX + base64.b64encode(raw).decode()


def cmd_keys_generate(args: argparse.Namespace) -> int:
    private_path, public_path, public_b64 = generate(args.key_id, args.out)
    print(f"private key: {private_path} (publisher only; keep it secret)")
    print(f"public key:  {public_path}")
    print(f"publisher:   SCD_PUBLISHER_SIGNING_KEY={private_path.resolve()}")
    print(f"             SCD_PUBLISHER_SIGNING_KEY_ID={args.key_id}")
    print(f"subscribers: SCD_SUBSCRIBER_VERIFY_KEYS={args.key_id}={public_b64}")
    return 0


def register(sub: Any) -> None:
    keys = sub.add_parser("keys", help="key pairs for signed package and command records")
    keys_sub = keys.add_subparsers(dest="action", required=True)
    gen = keys_sub.add_parser("generate", help="write a new Ed25519 key pair")
    gen.add_argument("--key-id", required=True, help="id sent with each signed record")
    gen.add_argument("--out", type=Path, required=True, help="directory for the key files")
    gen.set_defaults(func=cmd_keys_generate)
