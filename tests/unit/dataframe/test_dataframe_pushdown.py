"""Spark's filters as bounds of a store read (statestore.dataframe.pushdown): what is pushed,
exactly, and what is left to Spark."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringStartsWith,
)

from statestore.core.model import EVERYTHING, KeyRange, StoreSpec
from statestore.core.windows import SessionSpec, WindowSpec
from statestore.dataframe.pushdown import intersect, push

KV = StoreSpec("ks", "kv", "partitioned-kv", 4)
LONG_KEYS = StoreSpec("ks", "longs", "partitioned-kv", 4, key_codec="long")
WINDOWS = StoreSpec("ks", "w", "partitioned-window", 4, windowing=WindowSpec(60_000))
SESSIONS = StoreSpec("ks", "s", "partitioned-session", 4, windowing=SessionSpec(10_000))
KEY = ("key",)


def _at(millis: int, micros: int = 0) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=millis, microseconds=micros)


def test_key_equality_and_in_read_only_those_keys():
    bounds, rest = push(KV, [IsNotNull(KEY), EqualTo(KEY, "the")])
    assert bounds.wanted_keys() == (b"the",) and [type(f) for f in rest] == [IsNotNull]
    bounds, rest = push(KV, [In(KEY, ("b", "a", None))])
    assert bounds.wanted_keys() == (b"a", b"b") and rest == []
    bounds, _ = push(KV, [In(KEY, ("a", "b")), EqualTo(KEY, "b")])
    assert bounds.wanted_keys() == (b"b",)


def test_key_ranges_and_prefixes_narrow_the_key_range():
    bounds, rest = push(KV, [GreaterThanOrEqual(KEY, "b"), LessThan(KEY, "d"), GreaterThan(KEY, "a")])
    assert bounds.key_range == KeyRange(b"b", b"d", True, False) and rest == []
    bounds, _ = push(KV, [StringStartsWith(KEY, "ab"), LessThanOrEqual(KEY, "abz")])
    assert bounds.key_range == KeyRange(b"ab", b"abz", True, True)
    bounds, _ = push(KV, [In(KEY, ("a", "c")), GreaterThan(KEY, "b")])
    assert bounds.wanted_keys() == (b"c",)


def test_contradictions_read_nothing():
    assert push(KV, [EqualTo(KEY, "a"), EqualTo(KEY, "b")])[0].empty
    assert push(KV, [GreaterThan(KEY, "b"), LessThan(KEY, "b")])[0].empty
    assert push(KV, [In(KEY, ("a",)), GreaterThan(KEY, "a")])[0].empty
    assert not push(KV, [GreaterThanOrEqual(KEY, "b"), LessThanOrEqual(KEY, "b")])[0].empty


def test_what_the_table_cannot_serve_is_left_to_spark():
    others = [
        GreaterThan(("value",), 5),
        EqualTo(("batch_id",), 1),
        Not(EqualTo(KEY, "a")),
        StringContains(KEY, "x"),
        EqualTo(KEY, 5),  # not a string: the codec cannot store it, Spark judges it
        EqualTo(("key", "nested"), "a"),
    ]
    bounds, rest = push(KV, others)
    assert rest == others and bounds.keys is None and bounds.key_range == EVERYTHING


def test_long_keys_push_equality_but_not_ranges():
    # big-endian bytes put negative numbers after positive ones: a range is not a byte range
    bounds, rest = push(LONG_KEYS, [EqualTo(KEY, -3), GreaterThan(KEY, -10)])
    assert bounds.wanted_keys() == ((-3).to_bytes(8, "big", signed=True),)
    assert [type(f) for f in rest] == [GreaterThan]


def test_window_times_bound_the_window_start():
    bounds, rest = push(
        WINDOWS,
        [GreaterThanOrEqual(("window_start",), _at(120_000)), LessThan(("window_end",), _at(600_000))],
    )
    assert (bounds.time_from, bounds.time_to) == (120_000, 600_000 - 60_000 - 1) and rest == []
    bounds, _ = push(
        WINDOWS, [GreaterThan(("window_start",), _at(5, 500)), LessThanOrEqual(("window_start",), _at(9, 1))]
    )
    assert (bounds.time_from, bounds.time_to) == (6, 9)  # whole milliseconds strictly above 5.5, at most 9.001
    assert push(WINDOWS, [EqualTo(("window_start",), _at(7, 1))])[0].empty  # between two milliseconds
    _, rest = push(WINDOWS, [GreaterThan(("time",), _at(5)), GreaterThan(("session_end",), _at(5))])
    assert len(rest) == 2


def test_session_end_bounds_the_segments_read():
    bounds, rest = push(
        SESSIONS, [GreaterThan(("session_end",), _at(1_000)), LessThanOrEqual(("session_end",), _at(5))]
    )
    assert bounds.empty and rest == []
    _, rest = push(SESSIONS, [GreaterThan(("session_start",), _at(5))])
    assert len(rest) == 1


def test_intersect_keeps_the_tighter_bound_and_its_inclusiveness():
    assert intersect(KeyRange(b"a", b"z"), KeyRange(b"a", b"m", False, False)) == KeyRange(b"a", b"m", False, False)
    assert intersect(EVERYTHING, KeyRange(None, b"q")) == KeyRange(None, b"q")
    assert intersect(KeyRange(b"c"), KeyRange(b"b", b"d")) == KeyRange(b"c", b"d")
