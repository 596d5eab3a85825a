"""Aggregations per key and window (issue 47), without services: the window partials of parsed
JSON records against a brute-force truth over the pure window rules (WindowSpec.starts_of and
closed), the late records and their dead letters judged by the JSON event time, a partials row
as its delta keyed by window_cache_key, the applier over a fake window table, and the settings.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from datetime import UTC, datetime

import pytest

from statestore.core import config as cfg
from statestore.core.aggregation import AggregateSpec
from statestore.core.config import CassandraConfig, StreamConfig
from statestore.core.errors import ConfigError
from statestore.core.model import StoreSpec, WindowedEntry
from statestore.core.windows import WindowSpec
from statestore.store.book import deadletters
from statestore.store.tables.base import Found
from statestore.stream import aggregates
from statestore.stream.apply_cache import BucketCache
from statestore.stream.apply_windows import window_cache_key, window_of
from statestore.stream.dead_letters import write_dead_letters
from statestore.stream.json_input import JsonInput, dead_letter_rows, parsed_records
from statestore.stream.transforms import with_future_limit

SPEC = AggregateSpec.parse("n=count(), total=sum_int(amount), hi=max(amount), u=distinct(user)")
JSON = JsonInput(SPEC, ("shop",), None, "ts")
KAFKA = "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, timestampType int"
KAFKA_MS = 1_795_946_400_000  # every record's Kafka timestamp: far after its event time
WINDOWS = [WindowSpec(60_000), WindowSpec(60_000, 20_000), WindowSpec(10_000, 3_000, grace_ms=2_000)]


def _batch(spark, values, kafka_ms: int = KAFKA_MS):
    when = datetime.fromtimestamp(kafka_ms / 1000, UTC)
    rows = [(None, v.encode(), "t", 0, i, when, 0) for i, v in enumerate(values)]
    return with_future_limit(spark.createDataFrame(rows, KAFKA), KAFKA_MS * 1000, 300_000)


def _events(seed: int, count: int = 300) -> list[dict]:
    rng = random.Random(seed)
    return [
        {"shop": f"s{rng.randrange(4)}", "user": f"u{rng.randrange(20)}", "amount": rng.randrange(-50, 1000), "ts": t}
        for t in (rng.randrange(0, 400_000) for _ in range(count))
    ]


def _truth(events, windowing: WindowSpec, stream_time: int | None):
    """Per (shop, window start) of every open window of its events: the measures' results."""
    per = defaultdict(list)
    for e in events:
        for start in windowing.starts_of(e["ts"]):
            if not windowing.closed(start, stream_time):
                per[(e["shop"], start)].append(e)
    return {
        window: {
            "n": len(mine),
            "total": sum(e["amount"] for e in mine),
            "hi": float(max(e["amount"] for e in mine)),
            "u": len({e["user"] for e in mine}),
            "time": max(e["ts"] for e in mine),
        }
        for window, mine in per.items()
    }


def _late(events, windowing: WindowSpec, stream_time: int | None) -> dict[int, tuple[int, int]]:
    """offset -> (closed, of all) windows of each late event."""
    late = {}
    for offset, e in enumerate(events):
        starts = windowing.starts_of(e["ts"])
        closed = [s for s in starts if windowing.closed(s, stream_time)]
        if closed:
            late[offset] = (len(closed), len(starts))
    return late


def _deltas(spark, values, windowing, stream_time):
    parsed = parsed_records(_batch(spark, values), JSON)
    rows = [tuple(r) for r in aggregates.window_partials(parsed, JSON, windowing, stream_time).collect()]
    return [aggregates.window_delta_of(r, SPEC) for r in rows if r[0] is not None], rows


@pytest.mark.parametrize("windowing", WINDOWS, ids=str)
@pytest.mark.parametrize("stream_time", [None, 200_000])
def test_window_partials_are_every_key_and_open_window_of_a_brute_force_count(spark, windowing, stream_time):
    events = _events(seed=windowing.hop_ms)
    bad = ['{"shop": "s1", "amount": "x", "user": "u", "ts": 5}', "not json"]
    deltas, rows = _deltas(spark, [json.dumps(e) for e in events] + bad, windowing, stream_time)
    got = {}
    for d in deltas:
        key, start = window_of(d.key)
        result = SPEC.finish(d.accumulators)
        got[(key.decode(), start)] = {**result, "u": round(result["u"]), "time": d.time_ms}
        assert d.records == result["n"]
    assert got == _truth(events, windowing, stream_time)
    # The null key counts what the batch sends to dead letters: the bad records and the late ones.
    (uncountable,) = [r[1] for r in rows if r[0] is None]
    assert uncountable == len(bad) + len(_late(events, windowing, stream_time))


def test_a_record_is_late_by_its_json_event_time_not_its_kafka_time(spark):
    windowing = WindowSpec(60_000, 20_000)
    stream_time = 150_000
    # 130,000 is in windows 80k, 100k, 120k: 80k closed (80k + 60k < 150k); 50,000: all closed.
    events = [{"shop": "a", "user": "u", "amount": 1, "ts": t} for t in (130_000, 50_000, 190_000)]
    values = [json.dumps(e) for e in events]
    deltas, _ = _deltas(spark, values, windowing, stream_time)
    assert sorted(window_of(d.key) for d in deltas) == [
        (b"a", 100_000),
        (b"a", 120_000),
        (b"a", 140_000),
        (b"a", 160_000),
        (b"a", 180_000),
    ]
    parsed = parsed_records(_batch(spark, values), JSON)
    late = {r.offset: r for r in aggregates.late_letter_rows(parsed, windowing, stream_time).collect()}
    assert set(late) == {0, 1}
    assert {r.reason for r in late.values()} == {deadletters.LATE}
    assert late[0].detail.startswith("1 of its 3 window(s) had closed at stream time 150000 ms (no grace)")
    assert "event time 130000 ms" in late[0].detail
    assert late[1].detail.startswith("3 of its 3 window(s) had closed")
    assert late[0].raw == values[0].encode() and late[0].ts_ms == KAFKA_MS
    assert aggregates.late_letter_rows(parsed, windowing, None).count() == 0  # no stream time: none late


def test_a_record_before_1970_is_a_late_dead_letter_at_any_stream_time_never_counted_nowhere(spark):
    """No window holds a negative event time: it was counted nowhere and written nowhere (its
    batch's uncountable count said 1, no letter). It is a dead letter `late` saying why, on
    the first batch too (no stream time yet)."""
    windowing = WindowSpec(60_000)
    values = [json.dumps({"shop": "a", "user": "u", "amount": 1, "ts": t}) for t in (-5, 30_000)]
    parsed = parsed_records(_batch(spark, values), JSON)
    for stream_time in (None, 10_000):
        deltas, _ = _deltas(spark, values, windowing, stream_time)
        assert [window_of(d.key) for d in deltas] == [(b"a", 0)]
        (late,) = aggregates.late_letter_rows(parsed, windowing, stream_time).collect()
        assert (late.offset, late.reason) == (0, deadletters.LATE)
        assert late.detail == "its event time -5 ms is before 1970: no window holds it"


def test_write_dead_letters_takes_the_json_paths_rows_with_their_late_ones_and_adds_no_kafka_time_judgement(
    spark,
):
    # Every Kafka timestamp is 1 s: judged on it, every record would be late at 125 s.
    windowing = WindowSpec(60_000)
    store = StoreSpec("ks", "agg", "partitioned-window", 2, windowing=windowing, value_codec=SPEC.value_format)
    values = [json.dumps({"shop": "a", "user": "u", "amount": 1, "ts": t}) for t in (10_000, 130_000)] + ["[1]"]
    batch = _batch(spark, values, kafka_ms=1_000)
    parsed = parsed_records(batch, JSON)
    rows = dead_letter_rows(parsed).unionByName(aggregates.late_letter_rows(parsed, windowing, 125_000))
    written = []
    letters = write_dead_letters(
        None, batch, store, 3, 125_000, rows=rows, write=lambda s, ks, name, chunk, write_ts: written.extend(chunk)
    )
    assert letters == {deadletters.LATE: 1, deadletters.INVALID_JSON: 1}
    assert sorted((d.kafka_offset, d.reason) for d in written) == [(0, deadletters.LATE), (2, deadletters.INVALID_JSON)]


def test_a_window_partials_row_is_a_delta_keyed_by_its_window():
    row = ("k", 2, 70_000, 2, 7, 5.0, None, 60_000)
    delta = aggregates.window_delta_of(row, SPEC)
    assert delta.key == window_cache_key(b"k", 60_000) and window_of(delta.key) == (b"k", 60_000)
    assert (delta.records, delta.time_ms) == (2, 70_000)
    assert SPEC.finish(delta.accumulators)["total"] == 7
    assert [len(s) for s in aggregates.slices_of([row, row], SPEC, windowed=True)] == [2]


class FakeWindows:
    def __init__(self):
        self.rows: dict[tuple[bytes, int], WindowedEntry] = {}

    def read(self, session, windows, concurrency):
        return {w: self.rows[w] for w in windows if w in self.rows}

    def write(self, session, entries, concurrency, write_ts):
        self.rows.update({(e.key, e.start_ms): e for e in entries})


def test_the_applier_of_a_window_store_applies_each_slice_to_its_windows_and_a_replay_changes_nothing(monkeypatch):
    fake = FakeWindows()
    monkeypatch.setattr(aggregates, "window_table_for", lambda spec: fake)
    monkeypatch.setattr(aggregates, "session_for", lambda config: None)
    store = StoreSpec("ks", "agg", "partitioned-window", 2, windowing=WindowSpec(60_000), value_codec=SPEC.value_format)
    config = CassandraConfig()
    rows = [("a", 1, 10, 1, 3, 3.0, None, 0), ("a", 2, 70_000, 2, 5, 4.0, None, 60_000)]
    applier = aggregates.aggregate_applier(config, store, SPEC, 1, 1000)
    (stats,) = applier(iter(rows))
    assert (stats.keys, stats.written, stats.words, stats.max_time_ms) == (2, 2, 3, 70_000)
    (replay,) = aggregates.aggregate_applier(config, store, SPEC, 1, 1000)(iter(rows))
    assert (replay.written, replay.skipped) == (0, 2)
    values = {w: SPEC.finish(SPEC.unpack(e.value)) for w, e in fake.rows.items()}
    assert values[(b"a", 60_000)]["total"] == 5 and values[(b"a", 0)]["n"] == 1


BASE = {"topic": "t", "store": "s", "checkpoint": "/tmp/cp", "input_format": "json", "aggregate": "n=count()"}


def _stream(**overrides) -> StreamConfig:
    return cfg.resolve(StreamConfig, env={}, overrides={**BASE, "key": "u", **overrides})


class CountingWindows(FakeWindows):
    """FakeWindows counting the windows read; `expiring` ones are read as carrying a TTL."""

    def __init__(self, expiring=()):
        super().__init__()
        self.reads: list[tuple[bytes, int]] = []
        self.expiring = set(expiring)

    def read(self, session, windows, concurrency):
        self.reads += windows
        found = Found()
        found.update(super().read(session, windows, concurrency))
        found.expiring = {w for w in found if w in self.expiring}
        return found


def _window_deltas(*rows):
    return [aggregates.window_delta_of(row, SPEC) for row in rows]


def _cached_windows(table, path, batch_id, deltas, expected, fresh=False, stream_time=None):
    """One task's apply of window `deltas` with its bucket's file at `path`; the file's new token."""
    file = BucketCache(str(path), expected, fresh)
    try:
        stats = aggregates.apply_window_aggregates(
            None, STORE, SPEC, batch_id, deltas, 4, batch_id * 1000, table=table, stream_time_ms=stream_time, cache=file
        )
        return stats, file.finish()
    finally:
        file.close()


STORE = StoreSpec("ks", "agg", "partitioned-window", 2, windowing=WindowSpec(60_000), value_codec=SPEC.value_format)


def test_a_trusted_file_vouches_for_the_windows_accumulators_and_the_batch_reads_nothing(tmp_path):
    """Batch 1 on a fresh (complete) file reads nothing; batch 2, its token expected, merges into
    the file's records without a read: the same rows as an uncached apply. An untrusted file
    reads every window again."""
    table, plain = CountingWindows(), FakeWindows()
    first = _window_deltas(("a", 2, 10, 2, 5, 5.0, None, 0), ("b", 1, 70_000, 1, -1, -1.0, None, 60_000))
    second = _window_deltas(("a", 1, 15, 1, 2**62, 9.0, None, 0), ("b", 1, 80_000, 1, 3, 3.0, None, 60_000))
    stats, token = _cached_windows(table, tmp_path / "bucket", 1, first, None, fresh=True)
    assert stats.read == 0 and table.reads == []
    stats, token = _cached_windows(table, tmp_path / "bucket", 2, second, token)
    assert stats.read == 0 and table.reads == []
    for batch_id, deltas in ((1, first), (2, second)):
        aggregates.apply_window_aggregates(None, STORE, SPEC, batch_id, deltas, 4, batch_id * 1000, table=plain)
    assert table.rows == plain.rows and SPEC.codec.decode(table.rows[(b"a", 0)].value)["total"] == 5 + 2**62
    stats, _ = _cached_windows(table, tmp_path / "bucket", 3, second, "another token")
    assert stats.read == 2 and (stats.written, stats.skipped) == (2, 0)


def test_windows_after_the_stream_time_are_not_read_and_a_window_carrying_a_ttl_is_not_kept(tmp_path):
    """No window of the stream's starts after its stream time (apply_windows' rule): not read.
    A window read carrying a TTL is not kept in the file, so the next batch reads it again."""
    table = CountingWindows(expiring={(b"a", 0)})
    table.rows[(b"a", 0)] = WindowedEntry(b"a", 0, SPEC.pack(SPEC.identity()), 0, 5)
    deltas = _window_deltas(("a", 1, 10, 1, 1, 1.0, None, 0), ("a", 1, 70_000, 1, 1, 1.0, None, 60_000))
    stats, token = _cached_windows(table, tmp_path / "bucket", 1, deltas, None, stream_time=30_000)
    assert table.reads == [(b"a", 0)] and stats.read == 1
    table.reads.clear()
    later = _window_deltas(("a", 1, 11, 1, 1, 1.0, None, 0), ("a", 1, 71_000, 1, 1, 1.0, None, 60_000))
    _cached_windows(table, tmp_path / "bucket", 2, later, token, stream_time=70_000)
    assert table.reads == [(b"a", 0)]  # the TTL'd window again; the one batch 1 wrote is vouched for
    assert SPEC.codec.decode(table.rows[(b"a", 60_000)].value)["n"] == 2


def test_the_settings_take_windows_and_refuse_versioned_stores_saying_so():
    assert _stream(window=60_000, hop=20_000, grace=5_000).windowing == WindowSpec(60_000, 20_000, 5_000)
    assert _stream(window=60_000, store_type="partitioned-window").store_type == "partitioned-window"
    with pytest.raises(ConfigError, match="not a global-versioned store"):
        _stream(store_type="global-versioned")


def test_an_existing_window_store_with_other_windows_is_refused_naming_both():
    from statestore.core.errors import StoreMismatchError
    from statestore.stream.job import _refuse_other_windows

    held = StoreSpec("ks", "agg", "partitioned-window", 2, windowing=WindowSpec(60_000, segment_ms=60_000))
    with pytest.raises(StoreMismatchError, match=r"counts in 1m tumbling windows.*asks for 1m hopping windows \(hop"):
        _refuse_other_windows(held, WindowSpec(60_000, 20_000))
    _refuse_other_windows(held, WindowSpec(60_000))  # the same windows (the segment is the registry's): accepted
    _refuse_other_windows(held, None)  # none asked for: the store's own


def test_your_own_query_counts_per_window_with_the_jobs_window_settings(spark, monkeypatch):
    from pyspark.sql import functions as F

    from statestore.stream import own_query

    started = {}

    def start_query(spark_session, job, read, records, seams, *, name):
        started.update(job=job, records=records)
        return object()

    monkeypatch.setattr(own_query, "start_query", start_query)
    monkeypatch.setattr(own_query, "AggregationQuery", lambda running: running)
    source = spark.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:1")
    source = source.option("subscribe", "orders").option("startingOffsets", "earliest").load()
    orders = source.select("*", F.get_json_object(F.col("value").cast("string"), "$.shop").alias("shop"))
    own_query.start_aggregation(
        orders,
        store="s",
        measures="n=count()",
        key="shop",
        checkpoint="/tmp/x",
        cassandra=CassandraConfig(),
        window_ms=60_000,
        hop_ms=20_000,
        grace_ms=5_000,
    )
    assert started["job"].stream.windowing == WindowSpec(60_000, 20_000, 5_000)
    # The own query's rows are the JSON path's: the same window partials.
    batch = _batch(spark, [json.dumps({"shop": "a", "ts": 70_000})])
    staged, records = own_query.stage(
        batch.select("*", F.get_json_object(F.col("value").cast("string"), "$.shop").alias("shop")),
        AggregateSpec.parse("n=count()"),
        key="shop",
        time=F.get_json_object(F.col("value").cast("string"), "$.ts").cast("long"),
    )
    rows = aggregates.window_partials(records.parsed_records(staged), records, WindowSpec(60_000, 20_000), None)
    assert sorted((r.key, r.window_start, r.records) for r in rows.collect()) == [
        ("a", 20_000, 1),
        ("a", 40_000, 1),
        ("a", 60_000, 1),
    ]
