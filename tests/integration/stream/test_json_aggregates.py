"""JSON records into an aggregate store, end to end (Kafka -> Spark -> Cassandra): every key's
measures equal a brute-force truth computed from the produced events, across batches applied by
the driver and by the executors and a restart; a crash half-way through a batch's writes and a
restart stay exact; every bad record is a dead letter with its reason and counted nowhere."""

from __future__ import annotations

import json
import random
import time

import pytest

from statestore.core.aggregation import AggregateSpec
from statestore.core.errors import StoreMismatchError
from statestore.store.book import deadletters, registry
from statestore.store.tables import table_for
from statestore.stream.writer import DRIVER, EXECUTORS
from tests.integration.conftest import (
    produce_lines,
    run_batches,
    run_stream,
    spark_submit_killed_mid_batch,
    wait_for_lease_to_lapse,
)

MEASURES = (
    "n=count(), total=sum_int(amount), s=sum(amount), hi=max(amount), lo=min(amount), last=latest(pos), "
    "u=distinct(user)"
)
JSON = {"input_format": "json", "aggregate": MEASURES, "key": "shop", "time_field": "ts"}


def _events(count: int, seed: int, first: int = 0) -> list[dict]:
    """Events of 8 shops (skewed) and 150 users; `pos` and `ts` grow with the event, so a key's
    latest is its last event; amounts are integers, so the double sum is exact too."""
    rng = random.Random(seed)
    base = int(time.time() * 1000) - 600_000
    return [
        {
            "shop": f"shop{min(int(rng.paretovariate(1.2)), 8)}",
            "user": f"u{rng.randrange(150)}",
            "amount": rng.randrange(-1000, 10**6),
            "pos": {"n": first + i},
            "ts": base + first + i,
        }
        for i in range(count)
    ]


def _truth(events: list[dict]) -> dict[str, dict]:
    truth = {}
    for shop in sorted({e["shop"] for e in events}):
        mine = [e for e in events if e["shop"] == shop]
        amounts = [e["amount"] for e in mine]
        truth[shop] = {
            "n": len(mine),
            "total": sum(amounts),
            "s": float(sum(amounts)),
            "hi": float(max(amounts)),
            "lo": float(min(amounts)),
            "last": max(mine, key=lambda e: e["ts"])["pos"],
            "u": len({e["user"] for e in mine}),
        }
    return truth


def _dump(session, keyspace: str, store: str) -> dict[str, dict]:
    """The store's values, decoded by the codec its registry names; distinct rounded (under 150
    values a sketch of lg_k 12 is in its exact coupon mode)."""
    spec = registry.lookup(session, keyspace, store)
    codec = AggregateSpec.parse(spec.value_codec.removeprefix("aggregate:")).codec
    values = {e.key.decode(): codec.decode(e.value) for e in table_for(spec).scan_sorted(session)}
    return {key: {**value, "u": round(value["u"])} for key, value in values.items()}


def test_json_events_aggregate_to_the_brute_force_truth_on_the_driver_and_the_executors(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    events = _events(3400, seed=47)
    produce_lines(kafka_config, topic, [json.dumps(e) for e in events])
    # Batches of 1,500 records go to the executors, the last, smaller one to the driver.
    results = run_batches(
        spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", max_offsets_per_trigger=1500, **JSON
    )
    assert {r.applied_on for r in results} == {DRIVER, EXECUTORS}
    assert sum(r.stats.words for r in results) == len(events)
    assert sum(r.dead_letters for r in results) == 0
    # The apply cache vouched for every key: a fresh store's files, then the files it trusts.
    assert [r.stats.read for r in results] == [0] * len(results) and all(r.stats.keys for r in results)
    assert registry.lookup(session, keyspace, store_name).value_codec == "aggregate:" + MEASURES
    assert _dump(session, keyspace, store_name) == _truth(events)

    # A restart on the same checkpoint merges the new events into what the store holds.
    more = _events(500, seed=48, first=len(events))
    produce_lines(kafka_config, topic, [json.dumps(e) for e in more])
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", **JSON)
    assert _dump(session, keyspace, store_name) == _truth(events + more)

    # Other measures, or text lines, on this store: refused before anything is written.
    before = _dump(session, keyspace, store_name)
    produce_lines(kafka_config, topic, [json.dumps(e) for e in _events(10, seed=49, first=10**6)])
    other = {**JSON, "aggregate": "n=count()"}
    with pytest.raises(
        StoreMismatchError,
        match=r"keeps aggregate:n=count\(\), total=.*would write aggregate:n=count\(\)\. Nothing was",
    ):
        run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", **other)
    with pytest.raises(StoreMismatchError, match="would write word counts"):
        run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    # The store records how its records are keyed and timed; another key or time is refused too.
    assert registry.input_settings(session, keyspace, store_name) == registry.InputSettings(
        "json", ("shop",), None, "ts"
    )
    without_time = {k: v for k, v in JSON.items() if k != "time_field"}
    for other, named in (({**JSON, "key": "user"}, "--key user, --time-field ts"), (without_time, "Kafka timestamp")):
        with pytest.raises(
            StoreMismatchError, match="reads its records with --input-format json --key shop, --time-field ts"
        ) as refused:
            run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", **other)
        assert named in str(refused.value) and "Nothing was written" in str(refused.value)
    assert _dump(session, keyspace, store_name) == before


def test_every_bad_record_is_a_dead_letter_with_its_reason_and_counted_nowhere(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    now = int(time.time() * 1000)
    good = [
        {"shop": "a", "user": "u1", "amount": 5, "pos": 1, "ts": now - 2},
        {"shop": "b", "user": "u2", "amount": -7, "pos": 2, "ts": now - 1},
    ]

    def record(**fields) -> str:
        return json.dumps({"shop": "a", "user": "u", "amount": 1, "pos": 1, "ts": now - 5, **fields})

    bad = {
        deadletters.NULL_VALUE: None,
        deadletters.INVALID_UTF8: b'{"shop": "a\xff"}',
        deadletters.INVALID_JSON: '{"shop": "a", ',
        deadletters.MISSING_KEY: record(shop=None),
        deadletters.KEY_TOO_LONG: record(shop="k" * 70_000),
        deadletters.MISSING_FIELD: record(amount=None),
        deadletters.WRONG_TYPE: record(amount=2.5),
        deadletters.OVERFLOW: record(amount=10**19),
        deadletters.FUTURE: record(ts=now + 3_600_000),
    }
    not_an_object = "[1, 2, 3]"
    values = [json.dumps(good[0]), *bad.values(), not_an_object, json.dumps(good[1])]
    produce_lines(kafka_config, topic, values)
    results = run_batches(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp", **JSON)
    assert _dump(session, keyspace, store_name) == _truth(good)
    letters = sorted(deadletters.read_all(session, keyspace, store_name), key=lambda d: (d.reason, d.detail))
    expected = sorted([*bad, deadletters.INVALID_JSON])
    assert [d.reason for d in letters] == expected
    raw = {d.reason: d.raw for d in letters if d.reason != deadletters.INVALID_JSON}
    assert raw == {
        reason: None if v is None else (v if isinstance(v, bytes) else v.encode())
        for reason, v in bad.items()
        if reason != deadletters.INVALID_JSON
    }
    details = {d.reason: d.detail for d in letters}
    assert "field amount" in details[deadletters.MISSING_FIELD]
    assert "expected an integer, found DECIMAL(2,1) 2.5" in details[deadletters.WRONG_TYPE]
    assert "does not fit a 64-bit long" in details[deadletters.OVERFLOW]
    assert sum(r.dead_letters for r in results) == len(bad) + 1
    assert sum(r.stats.uncountable for r in results) == len(bad) + 1


def test_a_crash_half_way_through_a_batchs_writes_then_a_restart_stays_exact(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    events = _events(3000, seed=147)
    produce_lines(kafka_config, topic, [json.dumps(e) for e in events])
    checkpoint = tmp_path / "cp"
    spark_submit_killed_mid_batch(
        session,
        keyspace,
        store_name,
        *("--topic", topic, "--store", store_name, "--checkpoint", str(checkpoint), "--keyspace", keyspace),
        *("--input-format", "json", "--aggregate", MEASURES, "--key", "shop", "--time-field", "ts"),
        *("--max-offsets-per-trigger", "1000", "--driver-apply-records", "0", "--lease-ttl", "5"),
    )
    assert _dump(session, keyspace, store_name) != _truth(events)
    wait_for_lease_to_lapse(session, keyspace, store_name, ttl_s=5, whose="the crashed writer's")
    run_stream(spark, cassandra_config, kafka_config, topic, store_name, checkpoint, **JSON)
    assert _dump(session, keyspace, store_name) == _truth(events)
