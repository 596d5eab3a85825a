"""Times and numbers as the store page words them: "3 min ago" with the exact UTC time beside it
(for a hover title), digits grouped. Pure."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from statestore.present.text import to_text

_UNITS = ((86_400, "d"), (3_600, "h"), (60, "min"), (1, "s"))


def utc(ms: int | None) -> str:
    """The exact instant: 2026-11-27 04:42:11.032 UTC ("-" for none)."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def iso(ms: int) -> str:
    """The instant for a <time datetime=...> attribute: 2026-11-27T04:42:11.032Z."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def clock(ms: int) -> str:
    """The time of day, for chart labels: 04:42:11 UTC."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S UTC")


def ago(ms: int | None, now_ms: int) -> str:
    """How long before `now_ms`, in the largest unit or two: "just now", "42 s ago", "3 min ago",
    "2 h 5 min ago", "3 d ago"; a time ahead of now (clock skew) is "in 5 s"."""
    if ms is None:
        return "never"
    seconds = round((now_ms - ms) / 1000)
    ahead, seconds = seconds < 0, abs(seconds)
    if seconds < 5:
        return "just now"
    parts = []
    for size, unit in _UNITS:
        if seconds >= size:
            parts.append(f"{seconds // size} {unit}")
            seconds %= size
            if len(parts) == 2 or unit in ("min", "d"):
                break
        elif parts:
            break
    words = " ".join(parts)
    return f"in {words}" if ahead else f"{words} ago"


def grouped(value: float | None, decimals: int = 0) -> str:
    """1234567 -> "1,234,567" ("-" for none)."""
    if value is None:
        return "-"
    return f"{value:,.{decimals}f}"


def duration(seconds: float | None) -> str:
    """A duration: "0.4 s", "2 min 5 s" ("-" for none)."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:,.1f} s"
    return ago(0, round(seconds * 1000)).removesuffix(" ago")


def measure(value: Any) -> str:
    """A measure's result: integers grouped (exact, however large), other numbers and JSON
    values as the CLI prints them, "-" for none (a min or max before any input)."""
    if value is None:
        return "-"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return to_text(value)
