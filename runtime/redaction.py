"""Keeping secrets out of logs: defence in depth behind "never log a secret".

Every ``SecretStr`` value of a settings model (API token, SASL password, S3 secret key, signing
key, ...) is registered when the settings load (runtime/config.py); the daemons' log handler
(runtime/logs.py) then replaces any registered value in a log line, its exception text and its
stack with ``***``, wherever it came from (a library's exception message, a URL, a repr).
The first line of defence stays the code itself: settings errors never echo values, secrets
are ``SecretStr`` and only unwrapped where a client library needs them.
"""

from __future__ import annotations

import logging
import threading

from pydantic import BaseModel, SecretStr

MASK = "***"
# Shorter values are not registered: redacting every occurrence of a two-letter string would
# garble the logs, and a secret that short protects nothing anyway.
MIN_SECRET_CHARS = 4

_secrets: set[str] = set()
_lock = threading.Lock()


def register_secret(value: str) -> None:
    """Redact ``value`` from every log line from now on (no-op for short values)."""
    if len(value) >= MIN_SECRET_CHARS:
        with _lock:
            _secrets.add(value)


def register_model_secrets(model: BaseModel) -> None:
    """Register every ``SecretStr`` value of ``model`` and of the models it holds."""
    for name in type(model).model_fields:
        value = getattr(model, name, None)
        if isinstance(value, SecretStr):
            register_secret(value.get_secret_value())
        elif isinstance(value, BaseModel):
            register_model_secrets(value)


def redact(text: str) -> str:
    """``text`` with every registered secret replaced by ``***``."""
    with _lock:
        # Longest first: a secret containing another one is masked whole.
        secrets = sorted(_secrets, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


class RedactingFilter(logging.Filter):
    """A handler filter that masks registered secrets in the message, traceback and stack."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _secrets:
            return True
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            # Formatted here so that the formatter prints the masked text (it reuses exc_text).
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True
