"""The apply runs with Python's cyclic garbage collector off, and leaves it as it found it."""

from __future__ import annotations

import gc

import pyarrow as pa
import pytest

from statestore.stream.apply import ApplyStats, applied, collector_paused


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_an_apply_runs_with_the_collector_off_and_turns_it_back_on(collector_on):
    seen = []

    def applier(rows):
        seen.append((gc.isenabled(), list(rows)))
        yield ApplyStats(keys=1)

    batch = pa.record_batch([pa.array(["a"]), pa.array([2]), pa.array([5])], names=["word", "delta", "last_ms"])
    assert list(applied([batch], applier)) == [ApplyStats(keys=1)]
    assert seen == [(False, [("a", 2, 5)])]
    assert gc.isenabled()


def test_a_failing_apply_turns_the_collector_back_on(collector_on):
    def failing(rows):
        raise RuntimeError("Cassandra went away")
        yield

    with pytest.raises(RuntimeError):
        list(applied([], failing))
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    was = gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()


def test_rows_reach_the_applier_in_the_cache_files_order_without_the_uncountable():
    seen = []

    def applier(rows):
        seen.extend(rows)
        yield ApplyStats(keys=len(seen))

    words = ["zeta", " ", "Ähre", "alpha", "beta", " "]
    batch = pa.record_batch(
        [pa.array(words), pa.array([1, 4, 2, 3, 5, 6]), pa.array([9] * 6), pa.array([1, 0, 0, 1, 0, 1], pa.int32())],
        names=["word", "delta", "last_ms", "bucket"],
    )
    stats = list(applied([batch], applier))
    # By bucket, then by the words' UTF-8 bytes (LMDB's order: 'Ä' is 0xC3 0x84, after ASCII).
    assert seen == [("beta", 5, 9, 0), ("Ähre", 2, 9, 0), ("alpha", 3, 9, 1), ("zeta", 1, 9, 1)]
    assert stats == [ApplyStats(keys=4), ApplyStats(uncountable=10)]
