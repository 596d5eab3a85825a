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
