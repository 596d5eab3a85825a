"""Small batches are applied by the driver (statestore.stream.batch_apply.on_driver_for): the rule
from a batch's offsets, the shared walk over Arrow batches both paths use, and, on a local
Spark, which process runs the apply."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from statestore.core.model import MAX_KEY_BYTES
from statestore.store.book.registry import KafkaOffsets
from statestore.stream.apply import (
    UNCOUNTABLE,
    ApplyStats,
    applied,
    apply_on_driver,
    by_bucket,
    collect_at_most,
    run_applier,
    with_buckets,
)
from statestore.stream.batch_apply import on_driver_for
from statestore.stream.checkpoint import records_between
from statestore.stream.transforms import arrow_deltas, batch_deltas, word_times


def _offsets(**partitions: int) -> KafkaOffsets:
    return KafkaOffsets.of({"words": {p.removeprefix("p"): o for p, o in partitions.items()}})


def test_records_between_sums_every_partitions_span():
    assert records_between(_offsets(p0=10, p1=0), _offsets(p0=25, p1=7)) == 22
    assert records_between(_offsets(p0=5), _offsets(p0=5)) == 0


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (_offsets(p0=0), _offsets(p0=3, p1=4)),  # partition 1 added since: its start is unknown
        (_offsets(p0=-2), _offsets(p0=3)),  # 'earliest' as Spark writes it
        (_offsets(p0=9), _offsets(p0=3)),  # an end before the start
    ],
)
def test_records_between_is_unknown_where_an_offset_is(start, end):
    assert records_between(start, end) is None


def test_a_batch_goes_to_the_driver_only_when_it_is_known_to_be_small():
    start = _offsets(p0=0, p1=0)
    assert on_driver_for(start, _offsets(p0=600, p1=400), 1000)
    assert not on_driver_for(start, _offsets(p0=600, p1=401), 1000)
    assert not on_driver_for(start, _offsets(p0=1, p1=0), 0)  # 0: every batch on the executors
    assert not on_driver_for(_offsets(p0=0), _offsets(p0=1, p1=1), 1000)  # a new partition: unknown size


def _counting_applier(rows):
    rows = list(rows)
    yield ApplyStats(keys=len(rows), words=sum(r[1] for r in rows))


def test_the_uncountable_row_is_counted_apart_and_not_applied():
    batch = pa.record_batch(
        [pa.array(["a", UNCOUNTABLE, "b"]), pa.array([2, 5, 3], pa.int64()), pa.array([1, None, 2], pa.int64())],
        names=["word", "delta", "last_ms"],
    )
    assert sum(applied([batch], _counting_applier), ApplyStats()) == ApplyStats(keys=2, words=5, uncountable=5)


def _pid_recording_applier(directory: Path):
    """An applier that leaves a file named after the process that ran it, and counts its rows."""

    def apply_rows(rows):
        rows = list(rows)
        (directory / str(os.getpid())).touch()
        yield ApplyStats(keys=len(rows), words=sum(r[1] for r in rows), read=sum(len(r) for r in rows))

    return apply_rows


def _deltas(spark, n: int):
    rows = [(f"w{i}", i + 1, 1000 + i) for i in range(n)]
    return spark.createDataFrame(rows, "word string, delta long, last_ms long")


def test_a_small_batch_is_applied_in_the_drivers_own_process(spark, tmp_path):
    table = collect_at_most(with_buckets(_deltas(spark, 5), 4), 5)
    stats = apply_on_driver(table, _pid_recording_applier(tmp_path))
    assert stats == ApplyStats(keys=5, words=15, read=5 * 4)  # every row, with its bucket column
    assert [p.name for p in tmp_path.iterdir()] == [str(os.getpid())]


def test_more_rows_than_the_driver_takes_are_not_collected(spark):
    assert collect_at_most(_deltas(spark, 5), 4) is None


def test_a_row_wider_than_the_driver_takes_is_not_collected(spark):
    wide = spark.createDataFrame([("w" * 2_000, 1, 1000), ("ok", 1, 1000)], "word string, delta long, last_ms long")
    assert collect_at_most(wide, 10, row_bytes=1024) is None
    assert collect_at_most(wide, 10, row_bytes=4096).column_names == ["word", "delta", "last_ms"]
    sessions = spark.createDataFrame(
        [("a", 1, 1000, list(range(200)))], "word string, delta long, last_ms long, times array<long>"
    )
    assert collect_at_most(sessions, 10, row_bytes=1024) is None  # 1 + 200 * 8 bytes
    assert collect_at_most(sessions, 10, row_bytes=2048).num_rows == 1


def test_the_executors_apply_in_their_python_workers(spark, tmp_path):
    stats = run_applier(_deltas(spark, 5), _pid_recording_applier(tmp_path))
    assert (stats.keys, stats.words) == (5, 15)
    assert str(os.getpid()) not in {p.name for p in tmp_path.iterdir()}


def _kafka_like(spark, lines: list[tuple[bytes | None, int]]):
    """A batch DataFrame shaped as the Kafka source's: (value, timestamp) of each message."""
    return spark.createDataFrame([(value, ms) for value, ms in lines], "value binary, ms long").selectExpr(
        "value", "timestamp_millis(ms) AS timestamp"
    )


def test_the_drivers_deltas_equal_the_executors_deltas(spark):
    """arrow_deltas over word_times is batch_deltas done in Arrow: the same words, counts,
    latest times, buckets and uncountable row, over words, repeats, a null and invalid UTF-8."""
    batch = _kafka_like(
        spark,
        [
            (b"the cat saw the dog", 1_000),
            (b"The DOG ran", 3_000),
            (None, 2_000),
            (b"\xff\xfe not text", 4_000),
            (b"cat", 2_500),
            (("x" * (MAX_KEY_BYTES + 1) + " ok").encode(), 5_000),
        ],
    )
    on_executors = with_buckets(batch_deltas(batch, with_uncountable=True), 4).collect()
    on_driver = arrow_deltas(collect_at_most(word_times(batch, 4), 100))
    assert on_driver.column_names == ["word", "delta", "last_ms", "bucket"]
    expected = sorted(tuple(row) for row in on_executors)
    assert sorted(tuple(row.values()) for row in on_driver.to_pylist()) == expected
    assert (UNCOUNTABLE, 3) in {(w, d) for w, d, *_ in expected}  # the null, the non-text and the long word


def test_the_driver_applies_one_bucket_per_call_as_the_executors_tasks_do():
    """The applier keeps the files of the buckets it was given open until it returns: one
    call over 200 buckets would map 200 LMDB files at once (1 TiB of address space each)."""
    buckets = [i % 200 for i in range(1000)]
    deltas = pa.table(
        {
            "word": [f"w{i}" for i in range(1000)],
            "delta": pa.array([1] * 1000, pa.int64()),
            "last_ms": pa.array([7] * 1000, pa.int64()),
            "bucket": pa.array(buckets, pa.int32()),
        }
    )
    calls: list[set[int]] = []

    def one_call(rows):
        rows = list(rows)
        calls.append({row[3] for row in rows})
        yield ApplyStats(keys=len(rows))

    assert apply_on_driver(deltas, one_call) == ApplyStats(keys=1000)
    assert sorted(calls, key=min) == [{bucket} for bucket in range(200)]


def test_without_the_cache_the_driver_applies_every_row_in_one_call():
    deltas = pa.table({"word": ["a", "b"], "delta": pa.array([1, 2], pa.int64()), "last_ms": pa.array([1, 2])})
    assert [len(part) for part in by_bucket(deltas)] == [2]
    assert apply_on_driver(deltas, _counting_applier) == ApplyStats(keys=2, words=3)
