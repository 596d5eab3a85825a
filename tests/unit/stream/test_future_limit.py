"""The pure rules the batch protocol's simulator (tests/simulation) drives: a batch's future
limit (transforms.future_limit_ms, is_future_time: what with_future_limit and is_future compute
in Spark), its write timestamp on a given clock (position.write_ts_for's now_us) and the rules it
counts by (position.batch_rules: a replay keeps those it began under)."""

from __future__ import annotations

from dataclasses import replace

from statestore.store.book.registry import BatchPosition, BatchRules, StoreProgress
from statestore.stream.position import batch_rules, pending_position, write_ts_for
from statestore.stream.transforms import future_limit_ms, is_future_time


def _progress(pending=None, pending_ts=None, last_ts=None) -> StoreProgress:
    return StoreProgress(0, None, None, "t", "q", 0, None, pending, pending_ts, None, last_ts)


def test_the_future_limit_is_the_batch_clock_in_ms_plus_the_tolerance():
    assert future_limit_ms(1_700_000_000_123_456, 300_000) == 1_700_000_000_123 + 300_000


def test_a_record_is_future_only_strictly_after_the_limit():
    limit = future_limit_ms(1_000_000, 5)  # 1000 ms + 5
    assert not is_future_time(1005, limit)
    assert is_future_time(1006, limit)
    assert not is_future_time(None, limit)
    assert not is_future_time(10**15, None)


def test_a_new_batch_takes_the_given_clock_above_every_earlier_timestamp():
    assert write_ts_for(_progress(), 1, now_us=500) == 500
    assert write_ts_for(_progress(pending=1, pending_ts=700, last_ts=600), 2, now_us=500) == 701
    assert write_ts_for(_progress(pending=2, pending_ts=700), 2, now_us=5_000) == 700  # a replay keeps its own


def test_a_replay_of_the_pending_batch_keeps_the_rules_it_began_under():
    began = BatchRules(max_future_ms=300_000, retention_ms=None)
    progress = replace(_progress(pending=2, pending_ts=700), pending_rules=began, retention_ms=86_400_000)
    # Run again with --max-future 30m, after set-retention 1d: batch 2 still counts as it began.
    assert batch_rules(progress, 2, max_future_ms=1_800_000) == began
    assert pending_position(progress, max_future_ms=1_800_000).rules == began
    # A new batch takes this run's --max-future and the store's retention now.
    assert batch_rules(progress, 3, max_future_ms=1_800_000) == BatchRules(1_800_000, 86_400_000)
    # A pending batch begun by a release that recorded no rules: this run's.
    unrecorded = replace(progress, pending_rules=None)
    assert batch_rules(unrecorded, 2, max_future_ms=1_800_000) == BatchRules(1_800_000, 86_400_000)


def test_the_recorded_rules_are_the_positions_and_read_back_the_same():
    position = BatchPosition(batch_id=4, write_ts=9, start=None, end=None, retention_ms=None, max_future_ms=60_000)
    assert position.rules == BatchRules(60_000, None)
    assert BatchRules.parse_stored(position.rules.as_json()) == position.rules
    assert BatchRules.parse_stored(BatchRules(1, 2).as_json()) == BatchRules(1, 2)
    assert BatchRules.parse_stored(None) is None and BatchRules.parse_stored("") is None
    assert replace(position, max_future_ms=None).rules is None  # a tool's position: the run decides


def test_sparks_is_future_agrees_with_the_pure_rule_the_simulator_drives(spark):
    """with_future_limit + is_future (the job's Spark expression) against is_future_time, around
    the limit and without a time: the simulator's fake is only as good as this agreement."""
    from datetime import UTC, datetime

    from statestore.stream.transforms import is_future, with_future_limit

    write_ts, max_future_ms = 1_700_000_000_000_000, 300_000
    limit = future_limit_ms(write_ts, max_future_ms)
    times = [limit - 1, limit, limit + 1, limit + 60_000, None]
    rows = [(None if t is None else datetime.fromtimestamp(t / 1000, tz=UTC),) for t in times]
    df = with_future_limit(spark.createDataFrame(rows, "timestamp timestamp"), write_ts, max_future_ms)
    found = [row.future for row in df.select(is_future(df).alias("future")).collect()]
    assert found == [is_future_time(t, limit) for t in times] == [False, False, True, True, False]
