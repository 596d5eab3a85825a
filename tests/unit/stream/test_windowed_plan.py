"""The windowed word count's Spark plan against the pure window rules and a brute-force count."""

import random
from collections import Counter
from datetime import UTC, datetime

import pytest
from pyspark.sql import functions as F

from statestore.core.codecs import decode_long, encode_long
from statestore.core.model import WindowedEntry
from statestore.core.windows import WindowSpec, compose_windows
from statestore.stream.apply import UNCOUNTABLE, Delta
from statestore.stream.apply_windows import plan_window_writes
from statestore.stream.windowed import (
    NO_WINDOW,
    late_letter_rows,
    open_starts,
    pane_deltas,
    window_starts,
    windowed_deltas,
)

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


PANED = [
    WindowSpec(60_000, 20_000, panes=True),
    WindowSpec(10_000, 3_000, grace_ms=2_000, panes=True),  # panes of 1 s: gcd(10 s, 3 s)
    WindowSpec(6_000, 4_000, grace_ms=1_000, retention_ms=7_000, panes=True),  # retention = size + grace
]


@pytest.mark.parametrize("spec", PANED, ids=str)
@pytest.mark.parametrize("stream_time", [None, 30_000, 100_000])
def test_pane_deltas_are_one_row_per_word_pane_and_first_open_window_and_compose_to_the_window_deltas(
    spark, spec, stream_time
):
    """Each countable word is one row of its record's pane and `from` = WindowSpec.pane_from
    (a record whose windows all closed: no row), and the rows composed (compose_windows) are
    windowed_deltas' windows, deltas and latest times; the UNCOUNTABLE rows count the same."""
    assert spec.panes
    rng = random.Random(spec.size_ms + (stream_time or 0))
    rows = [(rng.choice([b"a", b"a b", b"b c a", b"", None]), rng.randrange(0, 120_000)) for _ in range(200)]
    rows += [(b"a", 0), (b"b", spec.size_ms - 1), (b"c", 10**12 + 17)]
    df = _records(spark, rows)
    deltas = pane_deltas(df, spec, stream_time).collect()
    got = {(r.word, r.pane_start, r.from_start): (r.delta, r.last_ms) for r in deltas}
    expected: Counter = Counter()
    latest: dict = {}
    for value, ms in rows:
        pane = spec.pane_of(ms)
        from_ms = spec.pane_from(pane, stream_time)
        for word in (value or b"").decode().split():
            if from_ms <= pane:
                expected[(word, pane, from_ms)] += 1
                latest[(word, pane, from_ms)] = max(latest.get((word, pane, from_ms), 0), ms)
    counted = {k: v for k, v in got.items() if k[0] != UNCOUNTABLE}
    assert counted == {k: (n, latest[k]) for k, n in expected.items()}
    assert {k[1:] for k in got if k[0] == UNCOUNTABLE} <= {(NO_WINDOW, NO_WINDOW)}

    windows = windowed_deltas(df, spec, stream_time).collect()
    by_window = {(r.word, r.window_start): (r.delta, r.last_ms) for r in windows if r.word != UNCOUNTABLE}
    composed = {}
    for word in {k[0] for k in counted}:
        mine = [(pane, from_ms, value) for (w, pane, from_ms), value in counted.items() if w == word]
        merge = lambda values: (sum(v[0] for v in values), max(v[1] for v in values))  # noqa: E731
        composed.update({(word, start): value for start, value in compose_windows(spec, mine, merge)})
    assert composed == by_window
    uncountable = sum(r.delta for r in windows if r.word == UNCOUNTABLE)
    assert sum(v[0] for k, v in got.items() if k[0] == UNCOUNTABLE) == uncountable


def test_a_partly_late_records_pane_row_starts_at_its_first_open_window(spark):
    # Windows of 10 s every 5 s, no grace: at stream time 19 s, window 10 s is open and 5 s closed.
    spec = WindowSpec(10_000, 5_000, retention_ms=60_000, panes=True)
    df = _records(spark, [(b"a", 12_000), (b"a", 22_000), (b"a", 3_000)])
    got = {(r.word, r.pane_start, r.from_start): r.delta for r in pane_deltas(df, spec, 19_000).collect()}
    # 12 s: windows 5 s (closed) and 10 s; 22 s: windows 15 s and 20 s; 3 s: window 0 s, closed.
    assert got == {("a", 10_000, 10_000): 1, ("a", 20_000, 15_000): 1, (UNCOUNTABLE, NO_WINDOW, NO_WINDOW): 2}
