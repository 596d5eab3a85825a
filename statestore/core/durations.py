"""Durations as people write them: a number and a unit (500ms, 30s, 1m, 2h, 7d, 2w). Pure: no I/O.

The one reader of durations in statestore: one unit table, one way to split text into its number
and unit (`split_unit`), and the three forms the front ends accept, each a thin check on top:

- `parse_duration`: a whole number and ms, s, m, h or d, e.g. 30s, 1m, 7d; the stream's settings
  (--window, --grace, --max-future, ...) and the DAGs' parameters. `format_duration` writes it back.
- `parse_trigger` / `trigger_seconds`: 'available-now', or a decimal number above 0 and ms, s, m or h,
  e.g. 1.5s; Spark's processing-time trigger (--trigger).
- `parse_duration_ms`: a decimal number, a space allowed before the unit, ms to w (weeks); a bare
  number is seconds; the maintenance jobs' ages and intervals (--older-than, ...).

Each form keeps the inputs it accepts and the messages it refuses with.
"""

from __future__ import annotations

import re

UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}

# The units each form takes, "ms" before "m" and "s": a text ending in "ms" is milliseconds.
SETTING_UNITS = ("ms", "s", "m", "h", "d")
TRIGGER_UNITS = ("ms", "s", "m", "h")
MAINTENANCE_UNITS = ("ms", "s", "m", "h", "d", "w")

_WHOLE = re.compile(r"\d+")
_DECIMAL = re.compile(r"\d+(?:\.\d+)?")


def split_unit(text: str, units: tuple[str, ...]) -> tuple[str, str] | None:
    """`text` as (what comes before the unit, the unit) for the first of `units` it ends with; None if none."""
    for unit in units:
        if text.endswith(unit):
            return text[: -len(unit)], unit
    return None


def parse_duration(text: str, what: str = "duration", zero: bool = False) -> int:
    """Milliseconds of `text`: digits and a unit (ms, s, m, h, d), e.g. 500ms, 30s, 1m, 2h, 7d.

    Raises ValueError naming `what` and the expected form; a duration is positive (or 0, with
    `zero`: a grace may be none).
    """
    parts = split_unit(text.strip().lower(), SETTING_UNITS)
    if parts is None or not _WHOLE.fullmatch(parts[0]):
        raise ValueError(f"{what} {text!r} is not a duration: write digits and a unit (ms, s, m, h, d), e.g. 30s or 1m")
    number, unit = parts
    millis = int(number) * UNIT_MS[unit]
    if millis < 0 or (millis == 0 and not zero):
        raise ValueError(f"{what} {text!r} must be longer than 0")
    return millis


def format_duration(millis: int) -> str:
    """The shortest exact text of `millis` (inverse of parse_duration); none at all is 0s."""
    if millis == 0:
        return "0s"
    for unit in ("d", "h", "m", "s"):
        if millis % UNIT_MS[unit] == 0:
            return f"{millis // UNIT_MS[unit]}{unit}"
    return f"{millis}ms"


def _interval(text: str) -> tuple[str, str] | None:
    """A processing-time interval split into number and unit: digits with at most one '.'."""
    parts = split_unit(text, TRIGGER_UNITS)
    if parts is None or not parts[0].replace(".", "", 1).isdigit():
        return None
    return parts


def parse_trigger(raw: str) -> str:
    """'available-now', or a processing-time interval such as '10s', '500ms', '1m'."""
    text = raw.strip().lower()
    if text == "available-now":
        return text
    parts = _interval(text)
    if parts is not None and float(parts[0]) > 0:
        return text
    raise ValueError("use 'available-now' or an interval like '10s', '500ms', '1m'")


def trigger_seconds(trigger: str) -> float:
    """The interval of a processing-time trigger, in seconds."""
    parts = _interval(trigger)
    if parts is None:
        raise ValueError(f"{trigger!r} is not a processing-time interval")
    number, unit = parts
    return float(number) * (UNIT_MS[unit] / 1000)


def parse_duration_ms(raw: str | int) -> int:
    """Milliseconds from '7d', '12h', '30m', '90s', '500ms', '2w' (a bare number is seconds)."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw * 1000
    text = str(raw).strip()
    if text.isdigit():
        return int(text) * 1000
    parts = split_unit(text.lower(), MAINTENANCE_UNITS)
    if parts is None or not _DECIMAL.fullmatch(parts[0].rstrip()):
        raise ValueError(f"{raw!r} is not a duration: use e.g. 7d, 12h, 30m, 90s, 500ms")
    number, unit = parts
    return int(float(number) * UNIT_MS[unit])
