"""The state-change clock: rows keyed by millisecond must never share one, nor go backwards."""

from __future__ import annotations

from statestore.store.book.stream_log import ChangeClock


def test_changes_in_one_millisecond_get_distinct_increasing_times():
    clock = ChangeClock(now=lambda: 1_700_000_000.0004)
    assert [clock.next_ms() for _ in range(4)] == [1_700_000_000_000 + i for i in range(4)]


def test_a_wall_clock_stepping_back_does_not_reorder_changes():
    readings = iter([100.0, 100.5, 99.0, 101.0])
    clock = ChangeClock(now=lambda: next(readings))
    assert [clock.next_ms() for _ in range(4)] == [100_000, 100_500, 100_501, 101_000]
