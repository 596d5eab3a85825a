"""The benchmark's arithmetic (bench/streaming_compare/compare/metrics.py): percentiles, ratios,
the record index, and throughput, latency and restart time as read from progress events."""

from __future__ import annotations

import json

import pytest
from compare.metrics import (
    RecordIndex,
    batch_range,
    commit_ms,
    data_batches,
    epoch_ms,
    latency_summary,
    percentile,
    ratio,
    record_latencies,
    restart_seconds,
    throughput,
)

T0 = "2026-11-22T10:00:00.000Z"
T0_MS = 1_795_341_600_000.0


def event(batch_id: int, start_s: float, duration_ms: int, start: dict | None, end: dict, rows: int | None = None):
    """A progress event as Spark's JSON has it (one Kafka source on topic t)."""
    ts = f"2026-11-22T10:00:{start_s:06.3f}Z"
    return {
        "batchId": batch_id,
        "timestamp": ts,
        "numInputRows": rows if rows is not None else sum(end.values()) - sum((start or {}).values()),
        "durationMs": {"triggerExecution": duration_ms, "addBatch": duration_ms - 10},
        "sources": [
            {
                "startOffset": None if start is None else json.dumps({"t": {str(p): o for p, o in start.items()}}),
                "endOffset": json.dumps({"t": {str(p): o for p, o in end.items()}}),
            }
        ],
    }


def index_of(words: dict[int, list[int]], ts_ms: dict[int, list[float]] | None = None) -> RecordIndex:
    index = RecordIndex()
    for partition, counts in words.items():
        for offset, n in enumerate(counts):
            stamp = ts_ms[partition][offset] if ts_ms else 0.0
            index.add(partition, offset, n, stamp)
    return index


def test_percentile_interpolates_between_ranks_like_numpy():
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert percentile(values, 50) == 3.0
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 5.0
    assert percentile(values, 99) == pytest.approx(4.96)  # numpy.percentile(values, 99)
    assert percentile([1.0, 2.0], 25) == pytest.approx(1.25)
    assert percentile([], 50) is None
    with pytest.raises(ValueError):
        percentile(values, 101)


def test_ratio_is_none_without_a_reference():
    assert ratio(30.0, 40.0) == 0.75
    assert ratio(None, 40.0) is None
    assert ratio(30.0, None) is None
    assert ratio(30.0, 0) is None


def test_progress_times_are_utc_milliseconds_and_commit_adds_the_trigger_duration():
    assert epoch_ms(T0) == T0_MS
    assert epoch_ms("2026-11-22T10:00:01.250Z") == T0_MS + 1250
    assert commit_ms(event(0, 1.25, 500, None, {0: 1})) == T0_MS + 1750


def test_data_batches_skip_empty_triggers_and_keep_one_event_per_batch():
    events = [
        event(1, 2, 100, {0: 1}, {0: 3}),
        event(0, 1, 100, None, {0: 1}),
        event(2, 3, 100, {0: 3}, {0: 3}),  # an empty trigger
        event(1, 4, 90, {0: 1}, {0: 3}),  # batch 1 reported again (after a restart): the last report counts
    ]
    batches = data_batches(events)
    assert [b["batchId"] for b in batches] == [0, 1]
    assert batches[1]["durationMs"]["triggerExecution"] == 90


def test_batch_range_reads_spark_offsets_json_and_a_missing_start():
    start, end = batch_range(event(0, 1, 100, None, {0: 5, 1: 7}))
    assert start == {} and end == {0: 5, 1: 7}
    start, end = batch_range(event(1, 1, 100, {0: 5, 1: 7}, {0: 9, 1: 7}))
    assert start == {0: 5, 1: 7} and end == {0: 9, 1: 7}


def test_record_index_counts_words_of_offset_ranges_per_partition():
    index = index_of({0: [1, 2, 3, 4], 1: [10, 20]})
    assert index.records == 6
    assert index.words_between({}, {0: 4, 1: 2}) == 40
    assert index.words_between({0: 1, 1: 1}, {0: 3, 1: 2}) == 2 + 3 + 20
    assert index.words_between({0: 4}, {0: 4}) == 0
    assert index.words_between({0: 2}, {0: 99}) == 3 + 4  # clipped to what was recorded


def test_record_index_starts_at_the_first_recorded_offset_of_a_partition():
    index = RecordIndex()
    for offset, n in ((24, 5), (25, 6)):
        index.add(0, offset, n, float(offset))
    assert index.words_between({0: 24}, {0: 26}) == 11
    assert index.words_between({}, {0: 25}) == 5
    assert index.timestamps_between({0: 25}, {0: 26}) == [25.0]
    with pytest.raises(ValueError, match="offset 27"):
        index.add(0, 27, 1, 0.0)  # offset 26 is missing
    assert RecordIndex.from_json(json.loads(json.dumps(index.to_json()))).words_between({}, {0: 26}) == 11


def test_throughput_leaves_out_the_first_batch_and_counts_gaps_between_batches():
    index = index_of({0: [10] * 30, 1: [10] * 30})  # 600 words
    events = [
        event(0, 0, 5000, None, {0: 10, 1: 10}),  # 200 words, 0-5 s (start-up)
        event(1, 5, 1000, {0: 10, 1: 10}, {0: 20, 1: 20}),  # 200 words, 5-6 s
        event(2, 7, 1000, {0: 20, 1: 20}, {0: 30, 1: 30}),  # 200 words, 7-8 s (1 s gap before)
    ]
    result = throughput(events, index)
    assert result["batches"] == 3
    assert result["words"] == 600
    assert result["words_per_batch"] == [200, 200, 200]
    assert result["sustained_words_per_s"] == pytest.approx(400 / 3)  # batches 2-3 over 5 s..8 s
    assert result["overall_words_per_s"] == pytest.approx(600 / 8)
    assert result["first_batch_s"] == 5.0
    assert result["batch_p50_s"] == 1.0  # the first batch is start-up: not in the percentiles
    assert result["batch_p99_s"] == 1.0


def test_throughput_of_no_batches_says_so():
    assert throughput([event(0, 0, 10, None, {0: 0}, rows=0)], RecordIndex())["batches"] == 0


def test_latency_is_batch_commit_minus_record_timestamp_after_the_warm_up():
    stamps = {0: [T0_MS + 100, T0_MS + 900, T0_MS + 1500, T0_MS + 2100]}
    index = index_of({0: [1, 1, 1, 1]}, stamps)
    events = [
        event(0, 1, 500, None, {0: 2}),  # commits at 1.5 s
        event(1, 2.5, 500, {0: 2}, {0: 4}),  # commits at 3.0 s
    ]
    latencies = record_latencies(events, index, produced_from_ms=T0_MS + 500)
    assert latencies == pytest.approx([0.6, 1.5, 0.9])
    summary = latency_summary(latencies, produced=3, seen=len(latencies))
    assert summary["p50_s"] == pytest.approx(0.9)
    assert summary["max_s"] == pytest.approx(1.5)
    assert summary["complete"]
    assert not latency_summary(latencies, produced=4, seen=3)["complete"]


def test_restart_time_runs_from_the_start_call_to_the_first_committed_batch_that_read_something():
    events = [
        event(5, 2, 300, {0: 10}, {0: 10}),  # an empty trigger first
        event(6, 3, 700, {0: 10}, {0: 12}),
    ]
    measured = restart_seconds(T0_MS + 500, events)
    assert measured["restart_s"] == pytest.approx(3.2)
    assert measured["until_trigger_s"] == pytest.approx(2.5)
    assert measured["first_batch_s"] == pytest.approx(0.7)
    assert restart_seconds(T0_MS, events[:1]) is None
