"""Logging set-up of the daemons and the CLI (the library itself never configures logging).

``SCD_LOG_FORMAT=json`` writes one JSON object per line with the standard fields plus the
structured ones scd attaches to its records (``agent``, ``pkg_id``, ``offset``, ...), for log
pipelines; the default is a readable text line. ``SCD_LOG_LEVEL`` sets the level (INFO).

``kill -USR1 <pid>`` makes a daemon write the stack of every thread to standard error (the
log), to see where a daemon that looks stuck is waiting, without stopping it.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import os
import signal
import sys
from typing import Any

from runtime.redaction import RedactingFilter

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s"
# Attributes every LogRecord has; anything else was passed with extra= and is structured data.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}",
            "level": record.levelname,
            "logger": record.name,
            "thread": record.threadName,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            # exc_text when set: RedactingFilter leaves the masked traceback there.
            entry["exception"] = record.exc_text or self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(default_level: str = "INFO") -> None:
    """Configure the root logger from SCD_LOG_FORMAT / SCD_LOG_LEVEL (once per process)."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler()
    fmt = os.environ.get("SCD_LOG_FORMAT", "text").lower()
    if fmt not in ("text", "json"):
        raise ValueError(f"SCD_LOG_FORMAT must be 'text' or 'json', not {fmt!r}")
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    # Defence in depth: a secret of the settings never reaches the log (runtime/redaction.py).
    handler.addFilter(RedactingFilter())
    root.addHandler(handler)
    root.setLevel(os.environ.get("SCD_LOG_LEVEL", default_level).upper())


def enable_stack_dumps() -> None:
    """On SIGUSR1, write every thread's stack to standard error and carry on."""
    # The process's own standard error (file descriptor 2), even where sys.stderr was replaced
    # by an object without a descriptor (an embedding host, a test harness).
    if sys.__stderr__ is not None:
        faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)
