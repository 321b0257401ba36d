"""JSON log lines carry the structured fields passed with extra=."""

from __future__ import annotations

import json
import logging

from journal.logs import JsonFormatter


def test_json_lines_carry_extras() -> None:
    record = logging.makeLogRecord(
        {"name": "subscriber.agent", "levelname": "INFO", "msg": "committed %d", "args": (7,)}
    )
    record.agent = "sub-1"
    record.offset = 7
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "committed 7"
    assert line["agent"] == "sub-1" and line["offset"] == 7
    assert line["logger"] == "subscriber.agent" and line["level"] == "INFO"
