"""The pure parts of `statestore status`: lag, rate, the last hour's dead letters, the table."""

import pytest

from statestore.cli.status import render
from statestore.store.status import (
    PartitionLag,
    StreamStatus,
    dead_letters_since,
    lag_of,
    last_restart,
    words_per_second,
)
from statestore.store.stream_log import BatchRecord, StateChange


def batch(batch_id, at_ms, words, seconds=1.0, dead=0):
    return BatchRecord(batch_id, batch_id, "run", at_ms, words, words, 0, words, dead, seconds, None, None)


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


def test_dead_letters_of_the_last_hour_only():
    batches = [batch(3, 7_200_000, 1, dead=2), batch(2, 3_600_000, 1, dead=5), batch(1, 3_599_999, 1, dead=100)]
    assert dead_letters_since(batches, 3_600_000) == 7


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
