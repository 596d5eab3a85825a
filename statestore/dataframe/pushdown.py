"""Spark's filters turned into bounds of a store read (what the table can narrow), and the rest
left to Spark. No I/O.

Pushed when the store's table can serve them, and then exactly (Spark does not check them again):

- on `key`: equality and IN (a partitioned store reads only those keys' partitions, a global
  store reads just those keys); ranges (<, <=, >, >=) and LIKE 'prefix%' when Spark orders the
  key column as Cassandra orders the stored bytes (string, json and binary keys; not long or
  int keys, whose big-endian bytes put negative numbers after positive ones): a slice of each
  partition of a partitioned store, a check on the rows read of a global one;
- on the store's own time column: window_start and window_end of a window store, session_end
  of a session store (their tables are segmented by it): only the segments in bounds are read.

Everything else (value, batch_id, time, a versioned store's validity, OR, NOT ...) is returned
to Spark, which filters the rows read: results are the same either way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
    StringStartsWith,
)

from statestore.core.model import EVERYTHING, KeyRange, StoreSpec
from statestore.dataframe.columns import CodecColumn, codec_column

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_COMPARISONS = (GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)


@dataclass(frozen=True)
class Bounds:
    """What the pushed filters narrow a read to: only `keys` (None: any), keys in `key_range`,
    the store's time column (window start, session end) in [time_from, time_to] epoch ms
    (None: unbounded); `empty` when the filters contradict each other."""

    keys: frozenset[bytes] | None = None
    key_range: KeyRange = EVERYTHING
    time_from: int | None = None
    time_to: int | None = None
    empty: bool = False

    def wanted_keys(self) -> tuple[bytes, ...] | None:
        """The keys to read, in key order, those outside the key range left out (None: a range read)."""
        if self.keys is None:
            return None
        return tuple(sorted(k for k in self.keys if self.key_range.contains(k)))


def push(spec: StoreSpec, filters: Iterable[Filter]) -> tuple[Bounds, list[Filter]]:
    """The bounds of `filters` (ANDed, as Spark hands them) on a read of `spec`, and the filters
    left for Spark (the very objects given, as Spark requires)."""
    key = codec_column(spec.key_codec)
    bounds, rest = Bounds(), []
    for found in filters:
        narrowed = _narrow(bounds, found, spec, key)
        if narrowed is None:
            rest.append(found)
        else:
            bounds = narrowed
    if bounds.keys is not None and not bounds.wanted_keys():
        bounds = replace(bounds, empty=True)
    if bounds.time_from is not None and bounds.time_to is not None and bounds.time_from > bounds.time_to:
        bounds = replace(bounds, empty=True)
    if _range_empty(bounds.key_range):
        bounds = replace(bounds, empty=True)
    return bounds, rest


def _narrow(bounds: Bounds, found: Filter, spec: StoreSpec, key: CodecColumn) -> Bounds | None:
    """`bounds` narrowed by one filter, or None when that filter is not pushed."""
    attribute = getattr(found, "attribute", None)
    if attribute == ("key",):
        try:
            return _narrow_keys(bounds, found, key)
        except (TypeError, ValueError):  # a literal the key codec cannot store: Spark judges it
            return None
    if attribute is not None and len(attribute) == 1:
        return _narrow_time(bounds, found, spec, attribute[0])
    return None


def _narrow_keys(bounds: Bounds, found: Filter, key: CodecColumn) -> Bounds | None:
    if isinstance(found, EqualTo | EqualNullSafe):
        if found.value is None:
            return None
        return _with_keys(bounds, {key.raw_of(found.value)})
    if isinstance(found, In):
        return _with_keys(bounds, {key.raw_of(v) for v in found.value if v is not None})
    if not key.ordered:
        return None
    if isinstance(found, StringStartsWith) and key.codec in ("string", "json"):
        return replace(bounds, key_range=intersect(bounds.key_range, KeyRange.prefix(key.raw_of(found.value))))
    if isinstance(found, _COMPARISONS):
        raw = key.raw_of(found.value)
        if isinstance(found, GreaterThan | GreaterThanOrEqual):
            bound = KeyRange(raw, None, isinstance(found, GreaterThanOrEqual))
        else:
            bound = KeyRange(None, raw, True, isinstance(found, LessThanOrEqual))
        return replace(bounds, key_range=intersect(bounds.key_range, bound))
    return None


def _with_keys(bounds: Bounds, keys: set[bytes]) -> Bounds:
    return replace(bounds, keys=frozenset(keys if bounds.keys is None else bounds.keys & keys))


def _narrow_time(bounds: Bounds, found: Filter, spec: StoreSpec, column: str) -> Bounds | None:
    """A bound on the window start (window_start, or window_end shifted by the window size) or
    the session end, in epoch ms; None for any other column or filter."""
    if spec.store_type.windowed and column in ("window_start", "window_end"):
        shift = spec.windowing.size_ms if column == "window_end" else 0
    elif spec.store_type.sessioned and column == "session_end":
        shift = 0
    else:
        return None
    if not isinstance(found, (*_COMPARISONS, EqualTo)) or not isinstance(found.value, datetime):
        return None
    low, high = _millis_bounds(found)
    if low is not None:
        low -= shift
        bounds = replace(bounds, time_from=low if bounds.time_from is None else max(low, bounds.time_from))
    if high is not None:
        high -= shift
        bounds = replace(bounds, time_to=high if bounds.time_to is None else min(high, bounds.time_to))
    return bounds


def _millis_bounds(found: Filter) -> tuple[int | None, int | None]:
    """The inclusive epoch-ms bounds a comparison with a timestamp puts on a column of whole
    milliseconds (a store's times are epoch ms; Spark compares in microseconds)."""
    moment = found.value if found.value.tzinfo is not None else found.value.replace(tzinfo=UTC)
    micros = (moment - _EPOCH) // _MICROSECOND
    floor, exact = divmod(micros, 1000)
    ceiling = floor + (1 if exact else 0)
    if isinstance(found, GreaterThan):
        return floor + 1, None
    if isinstance(found, GreaterThanOrEqual):
        return ceiling, None
    if isinstance(found, LessThan):
        return None, ceiling - 1
    if isinstance(found, LessThanOrEqual):
        return None, floor
    return (floor, floor) if not exact else (1, 0)  # EqualTo: an instant between two milliseconds matches none


_MICROSECOND = datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC) - _EPOCH


def intersect(a: KeyRange, b: KeyRange) -> KeyRange:
    """The keys in both ranges."""
    lower, lower_inclusive = a.lower, a.lower_inclusive
    if b.lower is not None and (lower is None or b.lower > lower or (b.lower == lower and not b.lower_inclusive)):
        lower, lower_inclusive = b.lower, b.lower_inclusive
    upper, upper_inclusive = a.upper, a.upper_inclusive
    if b.upper is not None and (upper is None or b.upper < upper or (b.upper == upper and not b.upper_inclusive)):
        upper, upper_inclusive = b.upper, b.upper_inclusive
    return KeyRange(lower, upper, lower_inclusive, upper_inclusive)


def _range_empty(r: KeyRange) -> bool:
    if r.lower is None or r.upper is None:
        return False
    return r.lower > r.upper or (r.lower == r.upper and not (r.lower_inclusive and r.upper_inclusive))
