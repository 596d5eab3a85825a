"""JSON records into a session aggregate store, end to end (Kafka -> Spark -> Cassandra): every
key's measures per session equal a brute-force truth that replays the batches (each batch's
records late when more than the grace older than the stream time the batches before it left,
the others sessionized per key with the gap over everything counted); late records are dead
letters `late`; a crash half-way through a batch's writes then a restart stay exact; your own
query keeps sessions too. One partition, so batches read the records in the order sent (the
harness of test_window_aggregates, on ordered_topic)."""

from __future__ import annotations

import json
import random
import time
from collections import defaultdict

from statestore.core.aggregation import AggregateSpec
from statestore.core.model import EVERYTHING
from statestore.core.windows import SessionSpec
from statestore.store.book import deadletters, registry
from statestore.store.builder import open_session_store
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
GAP_MS, GRACE_MS = 30_000, 10_000


def _events(count: int, seed: int, step_ms: int, old_every: int, old_ms: int) -> list[dict]:
    """Events of 5 shops and 100 users from 40 minutes ago (none ahead of the clock: the job's
    --max-future would make them dead letters), their times growing by `step_ms` with
    pauses longer than the gap (so each shop has several sessions); every `old_every`th is
    `old_ms` older than its place (late once the stream time has passed it by the grace)."""
    rng = random.Random(seed)
    at, events = int(time.time() * 1000) - 2_400_000, []
    for i in range(count):
        at += step_ms + (GAP_MS * 2 if rng.random() < 0.005 else 0)
        old = old_ms if i % old_every == old_every - 1 else 0
        shop, user = f"shop{rng.randrange(5)}", f"u{rng.randrange(100)}"
        events.append({"shop": shop, "user": user, "amount": rng.randrange(-1000, 10**6), "ts": at - old})
    return events


def _truth(batches: list[list[dict]], sessions: SessionSpec) -> tuple[dict, int]:
    """The measures per (shop, session start, session end) after the batches, in order, and how
    many records were late (by the stream time the previous batches left: the largest event time
    each counted)."""
    counted, stream_time, late = [], None, 0
    for batch in batches:
        on_time = [e for e in batch if stream_time is None or e["ts"] + sessions.grace_ms >= stream_time]
        late += len(batch) - len(on_time)
        counted += on_time
        if on_time:
            stream_time = max([e["ts"] for e in on_time] + ([] if stream_time is None else [stream_time]))
    per_shop = defaultdict(list)
    for e in counted:
        per_shop[e["shop"]].append(e)
    truth = {}
    for shop, mine in per_shop.items():
        mine.sort(key=lambda e: e["ts"])
        run = [mine[0]]
        for e in [*mine[1:], None]:
            if e is not None and e["ts"] - run[-1]["ts"] <= sessions.gap_ms:
                run.append(e)
                continue
            truth[(shop, run[0]["ts"], run[-1]["ts"])] = {
                "n": len(run),
                "total": sum(r["amount"] for r in run),
                "hi": float(max(r["amount"] for r in run)),
                "u": len({r["user"] for r in run}),
            }
            run = [e]
    return truth, late


def _dump(session, keyspace: str, store: str) -> dict[tuple[str, int, int], dict]:
    """Every session of the store, its value decoded by the measures (distinct rounded: under 150
    values a sketch of lg_k 12 is exact)."""
    values = {}
    for row in open_session_store(session, keyspace, store).raw_sessions(EVERYTHING, stream_time_ms=None):
        value = SPEC.finish(SPEC.unpack(row.value))
        values[(row.key.decode(), row.start_ms, row.end_ms)] = {**value, "u": round(value["u"])}
    return values


def _in_batches(events: list[dict], size: int) -> list[list[dict]]:
    return [events[i : i + size] for i in range(0, len(events), size)]


def test_sessions_per_key_equal_the_truth_and_late_records_are_dead_letters(
    spark, session, keyspace, cassandra_config, kafka_config, ordered_topic, store_name, tmp_path
):
    sessions = SessionSpec(GAP_MS, GRACE_MS)
    # 200 ms apart (a batch of 1,000 spans over 200 s); every 200th 10 minutes older: late.
    events = _events(2500, seed=51, step_ms=200, old_every=200, old_ms=600_000)
    produce_lines(kafka_config, ordered_topic, [json.dumps(e) for e in events])
    results = run_batches(
        spark,
        cassandra_config,
        kafka_config,
        ordered_topic,
        store_name,
        tmp_path / "cp",
        max_offsets_per_trigger=1000,
        driver_apply_records=600,  # the last batch on the driver, the others on the executors
        session_gap=GAP_MS,
        grace=GRACE_MS,
        **JSON,
    )
    assert {r.applied_on for r in results} == {DRIVER, EXECUTORS}
    truth, late = _truth(_in_batches(events, 1000), sessions)
    assert late > 0 and len({shop for shop, _, _ in truth}) == 5 and len(truth) > 10
    assert _dump(session, keyspace, store_name) == truth
    letters = list(deadletters.read_all(session, keyspace, store_name))
    assert len(letters) == late == sum(dict(r.dead_letter_reasons).get(deadletters.LATE, 0) for r in results)
    assert all("more than the grace (10s) older than the stream time" in d.detail for d in letters)
    spec = registry.lookup(session, keyspace, store_name)
    assert (spec.store_type.value, spec.value_codec, spec.windowing.gap_ms) == (
        "partitioned-session",
        SPEC.value_format,
        GAP_MS,
    )


def test_a_crash_half_way_through_a_session_batchs_writes_then_a_restart_stays_exact(
    spark, session, keyspace, cassandra_config, kafka_config, ordered_topic, store_name, tmp_path
):
    sessions = SessionSpec(GAP_MS, GRACE_MS)
    events = _events(2400, seed=151, step_ms=200, old_every=150, old_ms=600_000)
    produce_lines(kafka_config, ordered_topic, [json.dumps(e) for e in events])
    checkpoint = tmp_path / "cp"
    spark_submit_killed_mid_batch(
        session,
        keyspace,
        store_name,
        *("--topic", ordered_topic, "--store", store_name, "--checkpoint", str(checkpoint), "--keyspace", keyspace),
        *("--input-format", "json", "--aggregate", MEASURES, "--key", "shop", "--time-field", "ts"),
        *("--session-gap", "30s", "--grace", "10s"),
        *("--max-offsets-per-trigger", "800", "--driver-apply-records", "0", "--lease-ttl", "5"),
    )
    truth, late = _truth(_in_batches(events, 800), sessions)
    assert late > 0
    assert _dump(session, keyspace, store_name) != truth
    wait_for_lease_to_lapse(session, keyspace, store_name, ttl_s=5, whose="the crashed writer's")
    run_stream(
        spark,
        cassandra_config,
        kafka_config,
        ordered_topic,
        store_name,
        checkpoint,
        session_gap=GAP_MS,
        grace=GRACE_MS,
        **JSON,
    )
    assert _dump(session, keyspace, store_name) == truth
    assert len(list(deadletters.read_all(session, keyspace, store_name))) == late


def test_your_own_query_keeps_its_measures_per_session_too(
    spark, session, keyspace, cassandra_config, kafka_config, ordered_topic, store_name, tmp_path
):
    from statestore.stream.own_query import start_aggregation

    sessions = SessionSpec(GAP_MS, GRACE_MS)
    events = _events(600, seed=52, step_ms=500, old_every=60, old_ms=600_000)
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
        session_gap_ms=GAP_MS,
        grace_ms=GRACE_MS,
    )
    running.await_termination()
    truth, late = _truth(_in_batches(events, 200), sessions)
    assert late > 0
    assert _dump(session, keyspace, store_name) == truth
    assert len(list(deadletters.read_all(session, keyspace, store_name))) == late
