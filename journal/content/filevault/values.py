"""scd's typed values <-> FileVault's docview properties.

String, Long, Double, Boolean and Date map exactly, single or multi-valued (a date's text in
JCR's calendar, Julian before 1582-10-15, as the JVM's reads it). Name, Path,
Reference, WeakReference, URI and Decimal have no scd type: they are read as strings (a Decimal
keeps every digit) and reported as narrowed. Binaries are the codec's (files or references).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from journal.content import rules
from journal.content.filevault.docview_values import DocViewProperty
from journal.content.package import MultiValue, Value
from runtime.errors import DecodeError

# Read as strings: FileVault types without an scd type of their own.
NARROWED_TYPES = frozenset({"Name", "Path", "Reference", "WeakReference", "URI", "Decimal"})
_LONG = re.compile(r"[+-]?[0-9]{1,19}")
_DATE = re.compile(
    r"([+-]?[0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:\.([0-9]{1,9}))?(Z|[+-][0-9]{2}:[0-9]{2})"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_JDN = 2_440_588  # Julian day number of 1970-01-01
# JCR reads and writes dates with java.util.GregorianCalendar: Julian before this day.
_CUTOVER_DATE = (1582, 10, 15)
_CUTOVER_MS = -12_219_292_800_000
_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_SCALAR_TYPES = {
    "string_value": None,
    "long_value": "Long",
    "double_value": "Double",
    "bool_value": "Boolean",
    "date_ms": "Date",
}


def _julian_date(days: int) -> tuple[int, int, int]:
    """The Julian calendar's (year, month, day) of a day counted from 1970-01-01."""
    c = days + _EPOCH_JDN + 32_082
    d = (4 * c + 3) // 1461
    e = c - 1461 * d // 4
    m = (5 * e + 2) // 153
    return d - 4800 + m // 10, m + 3 - 12 * (m // 10), e - (153 * m + 2) // 5 + 1


def _julian_days(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to a Julian calendar date; raises DecodeError for none."""
    leap = year % 4 == 0
    if not 1 <= month <= 12 or not 1 <= day <= _MONTH_DAYS[month - 1] + (month == 2 and leap):
        raise DecodeError(f"{year:04d}-{month:02d}-{day:02d} is not a Julian calendar date")
    a = (14 - month) // 12
    y, m = year + 4800 - a, month + 12 * a - 3
    return day + (153 * m + 2) // 5 + 365 * y + y // 4 - 32_083 - _EPOCH_JDN


def format_date(ms: int) -> str:
    """A date as FileVault writes it (ISO 8601, milliseconds, UTC as ``Z``), in JCR's calendar:
    java.util.GregorianCalendar's, Julian before the Gregorian cutover of 1582-10-15."""
    moment = _EPOCH + timedelta(milliseconds=ms)
    if ms >= _CUTOVER_MS:
        return f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"
    year, month, day = _julian_date(ms // 86_400_000)
    return f"{year:04d}-{month:02d}-{day:02d}T{moment:%H:%M:%S}.{ms % 1000:03d}Z"


def parse_date(text: str) -> int:
    """Milliseconds since the epoch of an ISO 8601 date as FileVault writes one (an offset is
    kept as the instant it names; digits below the millisecond are dropped)."""
    match = _DATE.fullmatch(text)
    if match is None:
        raise DecodeError(f"{text[:80]!r} is not an ISO 8601 date")
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    date = (int(year), int(month), int(day))
    try:
        clock = datetime(2000, 1, 1, int(hour), int(minute), int(second))
        days = (
            (datetime(*date) - datetime(1970, 1, 1)).days
            if date >= _CUTOVER_DATE
            else _julian_days(*date)
        )
    except ValueError as exc:
        raise DecodeError(f"{text[:80]!r} is not a valid date: {exc}") from None
    offset = (
        0 if zone == "Z" else (int(zone[1:3]) * 60 + int(zone[4:6])) * (1 if zone[0] == "+" else -1)
    )
    seconds = days * 86_400 + clock.hour * 3600 + clock.minute * 60 + clock.second
    ms = seconds * 1000 + int((fraction or "0")[:3].ljust(3, "0"))
    return ms - offset * 60_000


def format_double(number: float) -> str:
    text = repr(number)
    return text if any(ch in text for ch in ".eEn") else text + ".0"


def _scalar(ptype: str | None, text: str) -> Value:
    if ptype == "Long":
        if not _LONG.fullmatch(text) or not -(2**63) <= int(text) < 2**63:
            raise DecodeError(f"{text[:80]!r} is not a Long")
        return Value(long_value=int(text))
    if ptype == "Double":
        try:
            return Value(double_value=float(text.strip()))
        except ValueError:
            raise DecodeError(f"{text[:80]!r} is not a Double") from None
    if ptype == "Boolean":  # as JCR reads one: "true" in any case, anything else false
        return Value(bool_value=text.lower() == "true")
    if ptype == "Date":
        return Value(date_ms=parse_date(text))
    return Value(string_value=text)


def to_value(prop: DocViewProperty) -> Value:
    """The scd value of a non-binary docview property."""
    if not prop.multi:
        return _scalar(prop.type, prop.values[0])
    return Value(multi_value=MultiValue(values=[_scalar(prop.type, v) for v in prop.values]))


def _scalar_text(value: Value) -> tuple[str | None, str]:
    kind = value.WhichOneof("kind")
    if kind == "long_value":
        return "Long", str(value.long_value)
    if kind == "double_value":
        return "Double", format_double(value.double_value)
    if kind == "bool_value":
        return "Boolean", "true" if value.bool_value else "false"
    if kind == "date_ms":
        return "Date", format_date(rules.check_date_ms(value.date_ms))
    if kind == "string_value":
        return None, value.string_value
    raise ValueError(f"value of kind {kind} is not a scalar")


def from_value(value: Value) -> DocViewProperty:
    """The docview property of a non-binary scd value."""
    if value.WhichOneof("kind") != "multi_value":
        ptype, text = _scalar_text(value)
        return DocViewProperty(ptype, (text,), False)
    items = [_scalar_text(v) for v in value.multi_value.values]
    ptype = items[0][0] if items else None
    return DocViewProperty(ptype, tuple(text for _, text in items), True)
