"""The windowed word count's Spark plan against the pure window rules and a brute-force count."""

import random
from collections import Counter
from datetime import UTC, datetime

import pytest
from pyspark.sql import functions as F

from statestore.core.codecs import decode_long, encode_long
from statestore.core.model import WindowedEntry
from statestore.core.windows import WindowSpec
from statestore.stream.apply import UNCOUNTABLE, Delta
from statestore.stream.apply_windows import plan_window_writes
from statestore.stream.windowed import late_letter_rows, open_starts, window_starts, windowed_deltas

SPECS = [
    WindowSpec(60_000),
    WindowSpec(60_000, 20_000),
    WindowSpec(10_000, 3_000, grace_ms=2_000),  # a hop that does not divide the size
    WindowSpec(5_000, 5_000, grace_ms=1_000, retention_ms=6_000),  # retention = size + grace
    WindowSpec(7, 1),
]


@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_window_starts_and_open_windows_match_the_pure_rules(spark, spec):
    rng = random.Random(spec.size_ms)
    times = [0, 1, spec.size_ms - 1, spec.size_ms, spec.hop_ms, 10**12 + 17] + [
        rng.randrange(0, 200_000) for _ in range(300)
    ]
    stream_time = 100_000
    df = spark.createDataFrame([(t,) for t in times], "t long")
    got = df.select(
        "t",
        window_starts(F.col("t"), spec).alias("starts"),
        open_starts(window_starts(F.col("t"), spec), spec, stream_time).alias("open"),
        open_starts(window_starts(F.col("t"), spec), spec, None).alias("all"),
    ).collect()
    for row in got:
        expected = spec.starts_of(row.t)
        assert row.starts == expected, row.t
        assert row.open == [s for s in expected if not spec.closed(s, stream_time)], row.t
        assert row.all == expected


@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_a_stream_time_per_record_closes_each_records_windows_by_its_own_time(spark, spec):
    # Validation judges each record by the stream time its late letter names; null: on time.
    rng = random.Random(spec.hop_ms)
    rows = [(rng.randrange(0, 200_000), rng.choice([None, rng.randrange(0, 250_000)])) for _ in range(300)]
    df = spark.createDataFrame(rows, "t long, now long")
    got = df.select("t", "now", open_starts(window_starts(F.col("t"), spec), spec, F.col("now")).alias("open"))
    for row in got.collect():
        assert row.open == [s for s in spec.starts_of(row.t) if not spec.closed(s, row.now)], (row.t, row.now)


def _records(spark, rows):
    """Kafka-like records: (value bytes, event time ms), offsets in order."""
    data = [
        ("t", 0, offset, None if value is None else bytearray(value), datetime.fromtimestamp(ms / 1000, UTC))
        for offset, (value, ms) in enumerate(rows)
    ]
    return spark.createDataFrame(data, "topic string, partition int, offset long, value binary, timestamp timestamp")


def test_windowed_deltas_equal_a_brute_force_count_and_late_records_are_named(spark):
    spec = WindowSpec(10_000, 5_000, grace_ms=1_000, retention_ms=60_000)
    stream_time = 40_000
    rows = [
        (b"a b a", 41_000),
        (b"b", 39_000),  # windows 30000 (open) and 35000 (open)
        (b"a", 28_000),  # windows 20000 and 25000, both closed (35000 + 1000 grace < 40000): counted nowhere
        (b"c", 33_500),  # windows 25000 (closed) and 30000 (open): late for one of two
        (b"\xff\xfe", 41_000),  # not UTF-8: uncountable, not late
        (b"   ", 1_000),  # no words: not late, nothing counted
        (None, 41_000),
    ]
    df = _records(spark, rows)
    got = {(r.word, r.window_start): (r.delta, r.last_ms) for r in windowed_deltas(df, spec, stream_time).collect()}
    expected: Counter = Counter()
    latest: dict = {}
    late = set()
    for offset, (value, ms) in enumerate(rows):
        if value is None or value == b"\xff\xfe":
            continue
        words = value.decode().split()
        starts = spec.starts_of(ms)
        if words and any(spec.closed(s, stream_time) for s in starts):
            late.add(offset)
        for word in words:
            for start in starts:
                if not spec.closed(start, stream_time):
                    expected[(word, start)] += 1
                    latest[(word, start)] = max(latest.get((word, start), 0), ms)
    counted = {k: v for k, v in got.items() if k[0] != UNCOUNTABLE}
    assert counted == {k: (n, latest[k]) for k, n in expected.items()}
    # Two uncountable messages and two late records make the apply look for dead letters.
    assert sum(v[0] for k, v in got.items() if k[0] == UNCOUNTABLE) == 2 + len(late)
    letters = late_letter_rows(df, spec, stream_time).collect()
    assert {r.offset for r in letters} == late == {2, 3}
    assert {r.reason for r in letters} == {"late"}
    by_offset = {r.offset: r.detail for r in letters}
    assert by_offset[2].startswith("2 of its 2 window(s)") and by_offset[3].startswith("1 of its 2 window(s)")


def test_nothing_is_late_before_the_store_has_a_stream_time(spark):
    spec = WindowSpec(1_000)
    df = _records(spark, [(b"x", 5), (b"x", 100_000)])
    got = {(r.word, r.window_start): r.delta for r in windowed_deltas(df, spec, None).collect()}
    assert got == {("x", 0): 1, ("x", 100_000): 1}
    assert late_letter_rows(df, spec, None).count() == 0


def test_window_plan_skips_windows_the_batch_already_wrote_and_adds_to_older_ones():
    current = {
        (b"a", 0): WindowedEntry(b"a", 0, encode_long(5), 7, 900),
        (b"a", 1000): WindowedEntry(b"a", 1000, encode_long(2), 8, 1500),
    }
    deltas = [(0, Delta(b"a", 3, 950)), (1000, Delta(b"a", 4, 1200)), (2000, Delta(b"b", 1, 2100))]
    writes, skipped = plan_window_writes(current, deltas, 8)
    assert skipped == 1  # (a, 1000) was written by batch 8 already: a replay
    assert [(w.key, w.start_ms, decode_long(w.value), w.batch_id, w.time_ms) for w in writes] == [
        (b"a", 0, 8, 8, 950),
        (b"b", 2000, 1, 8, 2100),
    ]
