"""Event time as people write it: durations ("1m", "500ms") and timestamped input lines
(`<epoch-millis><TAB><text>`, what `statestore produce --timestamped` sends). Pure: no I/O."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from statestore.core.errors import StateStoreError

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d)")
# Kafka takes any non-negative long; 9999-12-31 keeps times inside what Spark and Cassandra
# timestamps (and people) can read back.
MAX_EVENT_MS = 253_402_300_799_999


class TimestampedLineError(StateStoreError, ValueError):
    """A line of a --timestamped file that is not `<epoch-millis><TAB><text>`."""


def parse_duration(text: str, what: str = "duration", zero: bool = False) -> int:
    """Milliseconds of `text`: digits and a unit (ms, s, m, h, d), e.g. 500ms, 30s, 1m, 2h, 7d.

    Raises ValueError naming `what` and the expected form; a duration is positive (or 0, with
    `zero`: a grace may be none).
    """
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None:
        raise ValueError(f"{what} {text!r} is not a duration: write digits and a unit (ms, s, m, h, d), e.g. 30s or 1m")
    millis = int(match.group(1)) * _UNIT_MS[match.group(2)]
    if millis < 0 or (millis == 0 and not zero):
        raise ValueError(f"{what} {text!r} must be longer than 0")
    return millis


def format_instant(millis: int) -> str:
    """Epoch `millis` as UTC ISO text to the second, e.g. 2026-11-27T02:51:44Z."""
    return datetime.fromtimestamp(millis / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def format_duration(millis: int) -> str:
    """The shortest exact text of `millis` (inverse of parse_duration); none at all is 0s."""
    if millis == 0:
        return "0s"
    for unit in ("d", "h", "m", "s"):
        if millis % _UNIT_MS[unit] == 0:
            return f"{millis // _UNIT_MS[unit]}{unit}"
    return f"{millis}ms"


@dataclass(frozen=True)
class TimedValue:
    """One message to send with its own Kafka timestamp (epoch milliseconds)."""

    value: bytes
    timestamp_ms: int


def parse_timestamped_line(number: int, line: bytes) -> TimedValue:
    """Line `number` (1-based) of a --timestamped file: `<epoch-millis><TAB><text>`.

    The text passes through as bytes (invalid UTF-8 is the stream's to dead-letter); the time
    must be a whole number of milliseconds in [1, 9999-12-31].
    """
    stamp, tab, text = line.partition(b"\t")
    if not tab:
        raise TimestampedLineError(
            f"line {number}: no TAB after the time; a --timestamped line is <epoch-millis><TAB><text>"
        )
    raw = stamp.decode("ascii", "replace").strip()
    if not raw.isdigit():
        raise TimestampedLineError(
            f"line {number}: {raw[:40]!r} is not a time in epoch milliseconds (digits only, e.g. 1764000000000)"
        )
    millis = int(raw)
    if millis == 0:
        # librdkafka reads timestamp 0 as "now": it cannot be sent as an event time.
        raise TimestampedLineError(f"line {number}: time 0 cannot be sent (Kafka reads it as 'now'); use 1 or later")
    if millis > MAX_EVENT_MS:
        raise TimestampedLineError(f"line {number}: time {millis} is past 9999-12-31 ({MAX_EVENT_MS} ms)")
    return TimedValue(text, millis)
