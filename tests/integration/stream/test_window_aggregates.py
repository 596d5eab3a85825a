"""JSON records into a window aggregate store, end to end (Kafka -> Spark -> Cassandra): every key's
measures per window (1-minute tumbling, and 1 minute every 20 s) equal a brute-force truth that
replays the batches with the pure window rules (WindowSpec.starts_of and closed, the stream
time after each batch its largest counted event time); records late by their JSON event time
are dead letters `late`, counted in their open windows only; a crash half-way through a
batch's writes then a restart stay exact. One partition, so batches read the records in the
order sent (the harness of test_json_aggregates, on ordered_topic)."""

from __future__ import annotations

import json
import random
import time
from collections import defaultdict

import pytest

from statestore.core.aggregation import AggregateSpec
from statestore.core.errors import StoreMismatchError
from statestore.core.model import EVERYTHING
from statestore.core.windows import WindowSpec
from statestore.store.book import deadletters, registry
from statestore.store.builder import open_window_store
from statestore.stream.writer import DRIVER, EXECUTORS
from tests.integration.conftest import (
    produce_lines,
    run_batches,
    run_stream,
    shop_events_frame,
    spark_submit_killed_mid_batch,
    wait_for_lease_to_lapse,
)

MEASURES = "n=count(), total=sum_int(amount), hi=max(amount), u=distinct(user)"
JSON = {"input_format": "json", "aggregate": MEASURES, "key": "shop", "time_field": "ts"}
SPEC = AggregateSpec.parse(MEASURES)


def _base() -> int:
    """15 minutes ago, on a minute plus 5 s: where the windows' starts fall among the events is
    then the same on every run (from the wall clock alone, whether a record 30 s old had a
    window closed changed from one run to the next, and the hopping test found none late in
    about half of them)."""
    now = int(time.time() * 1000) - 900_000
    return now - now % 60_000 + 5_000


def _events(count: int, seed: int, base: int, step_ms: int, old_every: int, old_ms: int) -> list[dict]:
    """Events of 5 shops and 100 users, their times growing by `step_ms`; every `old_every`th is
    `old_ms` older than its place (late once the stream time has passed its windows)."""
    rng = random.Random(seed)
    return [
        {
            "shop": f"shop{rng.randrange(5)}",
            "user": f"u{rng.randrange(100)}",
            "amount": rng.randrange(-1000, 10**6),
            "ts": base + i * step_ms - (old_ms if i % old_every == old_every - 1 else 0),
        }
        for i in range(count)
    ]


def _truth(batches: list[list[dict]], windowing: WindowSpec) -> tuple[dict, int]:
    """The measures per (shop, window start) after the batches, in order, and how many records
    were late: each batch decides by the stream time the previous ones left (the largest event
    time each counted in some window)."""
    per = defaultdict(list)
    stream_time, late = None, 0
    for batch in batches:
        counted = []
        for e in batch:
            starts = windowing.starts_of(e["ts"])
            opened = [s for s in starts if not windowing.closed(s, stream_time)]
            late += len(opened) < len(starts)
            for start in opened:
                per[(e["shop"], start)].append(e)
            if opened:
                counted.append(e["ts"])
        if counted:
            stream_time = max([*counted, *([] if stream_time is None else [stream_time])])
    truth = {
        window: {
            "n": len(mine),
            "total": sum(e["amount"] for e in mine),
            "hi": float(max(e["amount"] for e in mine)),
            "u": len({e["user"] for e in mine}),
        }
        for window, mine in per.items()
    }
    return truth, late


def _dump(session, keyspace: str, store: str) -> dict[tuple[str, int], dict]:
    """Every window of the store, its value decoded by the measures (distinct rounded: under 150
    values a sketch of lg_k 12 is exact)."""
    windows = open_window_store(session, keyspace, store)
    values = {}
    for row in windows.raw_windows(EVERYTHING, 0, 2**63 - 1, stream_time_ms=None):
        value = SPEC.finish(SPEC.unpack(row.value))
        values[(row.key.decode(), row.start_ms)] = {**value, "u": round(value["u"])}
    return values


def _in_batches(events: list[dict], size: int) -> list[list[dict]]:
    return [events[i : i + size] for i in range(0, len(events), size)]


def test_tumbling_windows_per_key_equal_the_truth_and_late_records_are_dead_letters(
    spark, session, keyspace, cassandra_config, kafka_config, ordered_topic, store_name, tmp_path
):
    topic, windowing = ordered_topic, WindowSpec(60_000)
    base = _base()
    # 100 ms apart (a batch of 1,500 spans 150 s); every 250th 5 minutes older: late after batch 0.
    events = _events(3400, seed=47, base=base, step_ms=100, old_every=250, old_ms=300_000)
    produce_lines(kafka_config, topic, [json.dumps(e) for e in events])
    checkpoint = tmp_path / "cp"
    results = run_batches(
        spark,
        cassandra_config,
        kafka_config,
        topic,
        store_name,
        checkpoint,
        max_offsets_per_trigger=1500,
        window=60_000,
        **JSON,
    )
    assert {r.applied_on for r in results} == {DRIVER, EXECUTORS}
    # The apply cache and the stream time spare reads: windows after it are new, and the windows a
    # batch wrote are vouched for by its executor's file; every window of the first batch is new.
    assert results[0].stats.read == 0 and all(r.stats.read < r.stats.keys for r in results)
    truth, late = _truth(_in_batches(events, 1500), windowing)
    assert late > 0
    assert _dump(session, keyspace, store_name) == truth
    assert sum(dict(r.dead_letter_reasons).get(deadletters.LATE, 0) for r in results) == late
    letters = list(deadletters.read_all(session, keyspace, store_name))
    assert len(letters) == late and {d.reason for d in letters} == {deadletters.LATE}
    assert all("1 of its 1 window(s) had closed" in d.detail for d in letters)
    spec = registry.lookup(session, keyspace, store_name)
    assert (spec.store_type.value, spec.value_codec, spec.windowing.size_ms) == (
        "partitioned-window",
        SPEC.value_format,
        60_000,
    )

    # Other windows, or the same measures per key without windows: refused, nothing written.
    before = _dump(session, keyspace, store_name)
    produce_lines(kafka_config, topic, [json.dumps(events[-1])])
    with pytest.raises(StoreMismatchError, match=r"counts in 1m tumbling windows.*asks for 2m tumbling windows"):
        run_stream(spark, cassandra_config, kafka_config, topic, store_name, checkpoint, window=120_000, **JSON)
    with pytest.raises(StoreMismatchError, match="already exists as partitioned-window"):
        run_stream(
            spark, cassandra_config, kafka_config, topic, store_name, checkpoint, store_type="partitioned-kv", **JSON
        )
    assert _dump(session, keyspace, store_name) == before


def test_hopping_windows_count_a_partly_late_record_in_its_open_windows_only(
    spark, session, keyspace, cassandra_config, kafka_config, ordered_topic, store_name, tmp_path
):
    topic, windowing = ordered_topic, WindowSpec(60_000, 20_000)
    base = _base()
    # 1 s apart (a batch of 300 spans 5 minutes); every 40th 30 s older: 1 or 2 of its 3 windows
    # have closed by then, the others are open.
    events = _events(900, seed=48, base=base, step_ms=1000, old_every=40, old_ms=30_000)
    produce_lines(kafka_config, topic, [json.dumps(e) for e in events])
    results = run_batches(
        spark,
        cassandra_config,
        kafka_config,
        ordered_topic,
        store_name,
        tmp_path / "cp",
        max_offsets_per_trigger=300,
        window=60_000,
        hop=20_000,
        **JSON,
    )
    truth, late = _truth(_in_batches(events, 300), windowing)
    assert late > 0
    assert _dump(session, keyspace, store_name) == truth
    letters = list(deadletters.read_all(session, keyspace, store_name))
    assert len(letters) == late == sum(r.stats.uncountable for r in results)
    assert any("1 of its 3 window(s)" in d.detail for d in letters)
    assert all(d.reason == deadletters.LATE and "of its 3 window(s)" in d.detail for d in letters)


def test_a_crash_half_way_through_a_window_batchs_writes_then_a_restart_stays_exact(
    spark, session, keyspace, cassandra_config, kafka_config, ordered_topic, store_name, tmp_path
):
    topic, windowing = ordered_topic, WindowSpec(60_000, 20_000)
    base = _base()
    events = _events(3000, seed=147, base=base, step_ms=200, old_every=100, old_ms=90_000)
    produce_lines(kafka_config, topic, [json.dumps(e) for e in events])
    checkpoint = tmp_path / "cp"
    spark_submit_killed_mid_batch(
        session,
        keyspace,
        store_name,
        *("--topic", topic, "--store", store_name, "--checkpoint", str(checkpoint), "--keyspace", keyspace),
        *("--input-format", "json", "--aggregate", MEASURES, "--key", "shop", "--time-field", "ts"),
        *("--window", "1m", "--hop", "20s"),
        *("--max-offsets-per-trigger", "1000", "--driver-apply-records", "0", "--lease-ttl", "5"),
    )
    truth, late = _truth(_in_batches(events, 1000), windowing)
    assert late > 0
    assert _dump(session, keyspace, store_name) != truth
    wait_for_lease_to_lapse(session, keyspace, store_name, ttl_s=5, whose="the crashed writer's")
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, checkpoint, window=60_000, hop=20_000, **JSON)
    assert _dump(session, keyspace, store_name) == truth
    assert len(list(deadletters.read_all(session, keyspace, store_name))) == late


def test_your_own_query_keeps_its_measures_per_window_too(
    spark, session, keyspace, cassandra_config, kafka_config, ordered_topic, store_name, tmp_path
):
    from statestore.stream.own_query import start_aggregation

    windowing = WindowSpec(60_000, 20_000)
    base = _base()
    events = _events(600, seed=49, base=base, step_ms=500, old_every=50, old_ms=45_000)
    produce_lines(kafka_config, ordered_topic, [json.dumps(e) for e in events])
    running = start_aggregation(
        shop_events_frame(spark, kafka_config, ordered_topic, per_trigger=200),
        store=store_name,
        measures=MEASURES,
        key="shop",
        time="ts",
        checkpoint=str(tmp_path / "cp"),
        cassandra=cassandra_config,
        kafka=kafka_config,
        window_ms=60_000,
        hop_ms=20_000,
    )
    running.await_termination()
    truth, late = _truth(_in_batches(events, 200), windowing)
    assert late > 0
    assert _dump(session, keyspace, store_name) == truth
    assert len(list(deadletters.read_all(session, keyspace, store_name))) == late
