"""A key-value store's retention: the one rule of which entries are past it. Pure: no I/O.

A store may carry a retention (the registry's `retention_ms`). An entry whose event time is
older than the store's stream time minus the retention is **absent**: every read (the library's
gets and scans, the CLI, the HTTP API) leaves it out, and the stream's own read before write
takes it as absent too, so a key that comes back counts from zero. The expire job only
reclaims the space of what this rule already hides.

The edges, both chosen so nothing is hidden that cannot be judged:

- an entry with no event time (written by hand without one) is never past the retention;
- a store with no stream time yet (nothing applied by a stream) hides nothing.

Window and session stores are not covered: their windowing has its own retention, which their
reads already apply (statestore.core.windows).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from statestore.core.durations import format_duration, parse_duration

# What a front end writes for "no retention" (create-store --retention none, set-retention none).
NONE = "none"


def parse_retention(text: str | None) -> int | None:
    """Milliseconds of a retention as people write it (7d, 12h, 30m: statestore.core.durations'
    setting form), or None for `none` (or nothing): no retention. ValueError otherwise."""
    if text is None or text.strip().lower() in (NONE, ""):
        return None
    return parse_duration(text, "retention")


def format_retention(retention_ms: int | None) -> str:
    """The text of a retention (`none` for None), as parse_retention reads it back."""
    return NONE if retention_ms is None else format_duration(retention_ms)


def check_retention(retention_ms: Any) -> int | None:
    """`retention_ms` when it is None or a positive whole number of milliseconds, else ValueError."""
    if retention_ms is None:
        return None
    if isinstance(retention_ms, bool) or not isinstance(retention_ms, int) or retention_ms < 1:
        raise ValueError(f"a retention is a positive whole number of milliseconds (or none), got {retention_ms!r}")
    return retention_ms


def cutoff_ms(retention_ms: int | None, stream_time_ms: int | None) -> int | None:
    """The event time below which entries are absent: stream time - retention; None (nothing
    is hidden) without a retention or without a stream time."""
    if retention_ms is None or stream_time_ms is None:
        return None
    return stream_time_ms - retention_ms


def expired(time_ms: int | None, cutoff: int | None) -> bool:
    """The rule: an entry of event time `time_ms` is absent when it is dated before `cutoff`.
    No cutoff, or no event time: never."""
    return cutoff is not None and time_ms is not None and time_ms < cutoff


def expired_among(has_time, times, cutoff: int | None):
    """`expired` over arrays (the stream's plan judges a slice of keys at once): `has_time`
    says which entries have an event time, `times` holds them (numpy arrays, or anything with
    the same operators)."""
    if cutoff is None:
        return has_time & False
    return has_time & (times < cutoff)


def unexpired(entries: Iterable, cutoff: int | None) -> Iterator:
    """`entries` (anything with a `time_ms`) without those past `cutoff`, in their order."""
    if cutoff is None:
        return iter(entries)
    return (entry for entry in entries if not expired(entry.time_ms, cutoff))
