"""The pure parts of `statestore status`: lag, rate, the last hour's dead letters, the table."""

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from statestore.cli.status import render
from statestore.store.book.status import (
    PartitionLag,
    StreamStatus,
    dead_letters_between,
    lag_of,
    last_recorded_before,
    last_restart,
    rate_window,
    words_per_second,
)
from statestore.store.book.stream_log import BatchRecord, StateChange, Totals


def batch(batch_id, at_ms, words, seconds=1.0, dead=0):
    return BatchRecord(
        batch_id=batch_id,
        spark_batch_id=batch_id,
        run_id="run",
        recorded_at_ms=at_ms,
        keys=words,
        written=words,
        skipped=0,
        words=words,
        dead_letters=dead,
        seconds=seconds,
        end_offsets=None,
        max_event_time_ms=None,
    )


def test_lag_is_end_minus_position_per_partition_and_whole_for_unread_partitions():
    position = '{"t":{"0":10,"1":7},"other":{"0":99}}'
    assert lag_of("t", {0: 15, 1: 7, 2: 4}, position) == [
        PartitionLag("t", 0, 15, 10, 5),
        PartitionLag("t", 1, 7, 7, 0),
        PartitionLag("t", 2, 4, None, 4),
    ]
    assert [p.lag for p in lag_of("t", {0: 3}, None)] == [3]
    # A topic recreated with fewer records than the store read: no negative lag.
    assert lag_of("t", {0: 2}, '{"t":{"0":10}}')[0].lag == 0


def test_words_per_second_spans_the_batches_commits():
    newest_first = [batch(3, 30_000, 600), batch(2, 20_000, 400), batch(1, 10_000, 999_999)]
    # The oldest batch's words came before the span starts: (600 + 400) words in 20 s.
    assert words_per_second(newest_first) == 50.0
    assert words_per_second([batch(1, 10_000, 300, seconds=2.0)]) == 150.0
    assert words_per_second([]) is None


def test_the_rate_is_the_newest_runs_not_the_idle_time_between_runs():
    """Three available-now runs minutes apart (make run, then the DAG), 540 words in 2 s each:
    the rate is the newest run's, not 1,080 words over the 10 minutes since the first (1.9/s)."""
    runs = [replace(batch(i, i * 300_000, 540, seconds=2.0), run_id=f"run{i}") for i in (2, 1, 0)]
    assert rate_window(runs) == runs[:1]
    assert words_per_second(rate_window(runs)) == 270.0
    one_run = [batch(3, 30_000, 600), batch(2, 20_000, 400), batch(1, 10_000, 999_999)]
    assert rate_window(one_run) == one_run  # a stream that keeps running: every batch
    assert rate_window([]) == []


def logged(rows: list[tuple[int, int, int]]) -> list[BatchRecord]:
    """(batch id, recorded at, dead letters) oldest first -> records carrying running sums."""
    records, total = [], 0
    for batch_id, at_ms, dead in rows:
        total += dead
        record = batch(batch_id, at_ms, 1, dead=dead)
        records.append(replace(record, totals=Totals(dead_letters=(("bad", total),) if total else ())))
    return records


def probe_of(records: list[BatchRecord], asked: list[int]):
    def at_or_before(batch_id: int) -> BatchRecord | None:
        asked.append(batch_id)
        return next((r for r in reversed(records) if r.batch_id <= batch_id), None)

    return at_or_before


def test_dead_letters_of_the_last_hour_only():
    records = logged([(1, 3_599_999, 100), (2, 3_600_000, 5), (3, 7_200_000, 2)])
    before = last_recorded_before(records[-1], 3_600_000, probe_of(records, []))
    assert before.batch_id == 1
    assert dead_letters_between(records[-1], before) == 7
    # Every batch that recent: all of them count.
    assert last_recorded_before(records[-1], 0, probe_of(records, [])) is None
    assert dead_letters_between(records[-1], None) == 107


@given(
    st.lists(st.tuples(st.integers(1, 5), st.integers(0, 5_000), st.integers(0, 9)), min_size=1, max_size=200),
    st.integers(0, 1_100_000),
)
def test_the_bisection_finds_what_a_scan_finds_in_few_reads(steps, since_ms):
    # Batch ids with gaps (batches the log lost to its TTL), times growing with the id.
    rows, batch_id, at_ms = [], -1, 0
    for id_step, time_step, dead in steps:
        batch_id, at_ms = batch_id + id_step, at_ms + time_step
        rows.append((batch_id, at_ms, dead))
    records = logged(rows)
    asked: list[int] = []
    found = last_recorded_before(records[-1], since_ms, probe_of(records, asked))
    expected = next((r for r in reversed(records) if r.recorded_at_ms < since_ms), None)
    assert found == expected
    assert dead_letters_between(records[-1], found) == sum(d for _, at, d in rows if at >= since_ms)
    assert len(asked) <= records[-1].batch_id.bit_length() + 1


def test_the_last_restart_is_the_newest_state_with_a_restart_time():
    states = [
        StateChange("stopped", 9, None, "b", "h", 1, None),
        StateChange("running", 8, "first batch (4) committed", "b", "h", 1, 2.5),
        StateChange("running", 7, "query started", "b", "h", 1, None),
        StateChange("running", 3, "first batch (1) committed", "a", "h", 1, 9.0),
    ]
    assert last_restart(states).restart_seconds == 2.5
    assert last_restart(states[2:3]) is None


@pytest.mark.parametrize("writer", [None, "host:42:ab"])
def test_the_table_names_every_figure(writer):
    status = StreamStatus(
        "counts", "ks", "partitioned-kv", "running", 1_767_225_600_000, "query started", writer, 1_767_225_600_000,
        12, 1_767_225_660_000, 4.2, [PartitionLag("t", 0, 15, 10, 5)], 5, 1234.5, 20, 3, 2.5, 1_767_225_610_000, None,
    )  # fmt: skip
    text = render(status, {"last_audit": {"status": "ok", "at": "2026-01-01T00:00:00Z"}, "last_validation": None})
    assert "running since 2026-01-01T00:00:00Z (query started)" in text
    assert "12 at 2026-01-01T00:01:00Z (4.2 s ago)" in text
    assert "5 records (t[0] 5)" in text and "1,234.5 over the last 20 batch(es)" in text
    assert "3 in the last hour" in text and "2.5 s, at 2026-01-01T00:00:10Z" in text
    assert "ok at 2026-01-01T00:00:00Z" in text and text.rstrip().endswith("never")
    assert ("none: no driver holds the store's lease" in text) == (writer is None)
    names = [line[:15].strip() for line in text.splitlines()]
    assert names == [
        "store", "state", "writer", "last batch", "lag", "words/s", "dead letters", "last restart", "event time",
        "last audit", "last validation",
    ]  # fmt: skip
