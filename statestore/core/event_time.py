"""Event time as people write it: timestamped input lines (`<epoch-millis><TAB><text>`, what
`statestore produce --timestamped` sends) and instants shown as UTC text. Pure: no I/O.

Durations ("1m", "500ms") have their own home, statestore.core.durations.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from statestore.core.errors import StateStoreError

# Kafka takes any non-negative long; 9999-12-31 keeps times inside what Spark and Cassandra
# timestamps (and people) can read back.
MAX_EVENT_MS = 253_402_300_799_999


class TimestampedLineError(StateStoreError, ValueError):
    """A line of a --timestamped file that is not `<epoch-millis><TAB><text>`."""


def format_instant(millis: int) -> str:
    """Epoch `millis` as UTC ISO text to the second, e.g. 2026-11-27T02:51:44Z."""
    return datetime.fromtimestamp(millis / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def instant_to_millisecond(millis: int | None) -> str | None:
    """Epoch `millis` as UTC ISO text to the millisecond, e.g. 2026-11-27T02:51:44.120+00:00 (the
    maintenance reports' form); None stays None."""
    return None if millis is None else datetime.fromtimestamp(millis / 1000, UTC).isoformat(timespec="milliseconds")


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
