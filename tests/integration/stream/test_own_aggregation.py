"""Your own query into an aggregate store, end to end (Kafka -> your transforms -> Cassandra):
the example job (jobs/own_aggregation.py: JSON orders, cancelled ones filtered out, joined with a
static table of shops) killed half-way through a batch's writes, then restarted in this process
with start_aggregation on its checkpoint, ends with every key equal to a brute-force truth, and
the orders it cannot count (an unknown shop, no JSON, no amount) are dead letters."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobs import own_aggregation
from statestore.conn.spark import connector_jars
from statestore.core.aggregation import AggregateSpec
from statestore.core.errors import StoreMismatchError
from statestore.store.book import deadletters, registry
from statestore.store.tables import table_for
from statestore.stream.faults import ENV as FAULT_ENV
from statestore.stream.own_query import start_aggregation
from tests.integration.conftest import PROJECT, produce_lines, run_stream, wait_for_lease_to_lapse

REGIONS = dict(own_aggregation.SHOPS)


def _orders(count: int, seed: int) -> list[dict]:
    """Orders of 14 shops (s12 and s13 in no region), about one in eight cancelled."""
    rng = random.Random(seed)
    base = int(time.time() * 1000) - 600_000
    return [
        {
            "order": f"o{i}",
            "shop": f"s{rng.randrange(14)}",
            "customer": f"c{rng.randrange(60)}",
            "amount": rng.randrange(1, 10**6),
            "status": "cancelled" if rng.random() < 0.125 else "paid",
            "ts": base + i,
        }
        for i in range(count)
    ]


def _truth(orders: list[dict]) -> dict[str, dict]:
    kept: dict[str, list[dict]] = {}
    for o in orders:
        if o["status"] != "cancelled" and o["shop"] in REGIONS:
            kept.setdefault(f"{REGIONS[o['shop']]}/{o['shop']}", []).append(o)
    return {
        key: {
            "orders": len(mine),
            "revenue": sum(o["amount"] for o in mine),
            "biggest": float(max(o["amount"] for o in mine)),
            "customers": len({o["customer"] for o in mine}),
            "last_order": max(mine, key=lambda o: o["ts"])["order"],
        }
        for key, mine in kept.items()
    }


def _dump(session, keyspace: str, store: str) -> dict[str, dict]:
    spec = registry.lookup(session, keyspace, store)
    codec = AggregateSpec.parse(spec.value_codec.removeprefix("aggregate:")).codec
    values = {e.key.decode(): codec.decode(e.value) for e in table_for(spec).scan_sorted(session)}
    return {key: {**value, "customers": round(value["customers"])} for key, value in values.items()}


def test_the_example_query_killed_mid_write_then_restarted_with_start_aggregation_stays_exact(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    orders = _orders(2400, seed=4747)
    no_amount = {"order": "x1", "shop": "s1", "customer": "c1", "status": "paid", "ts": orders[0]["ts"]}
    produce_lines(kafka_config, topic, [*map(json.dumps, orders), "not json", json.dumps(no_amount)])
    checkpoint = tmp_path / "cp"
    flags = ["--topic", topic, "--store", store_name, "--checkpoint", str(checkpoint), "--keyspace", keyspace]
    flags += ["--kafka-bootstrap", kafka_config.bootstrap_servers]
    crashed = subprocess.Popen(
        [
            "spark-submit",
            *("--master", "local[2]", "--jars", ",".join(connector_jars())),
            str(PROJECT / "jobs" / "own_aggregation.py"),
            *flags,
            *("--max-offsets-per-trigger", "800", "--driver-apply-records", "0", "--lease-ttl", "5"),
        ],
        env={
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            "PYTHONPATH": str(PROJECT),
            FAULT_ENV: "kill-mid-write:1",
        },
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert crashed.wait(timeout=600) != 0
    half = registry.progress(session, keyspace, store_name)
    assert (half.last_batch_id, half.pending_batch_id) == (0, 1), "the crash left no half-written batch 1"
    assert _dump(session, keyspace, store_name) != _truth(orders)
    wait_for_lease_to_lapse(session, keyspace, store_name, ttl_s=5, whose="the crashed writer's")

    args, _, _ = own_aggregation.parse_args(flags)
    own_aggregation.start(spark, args, cassandra_config, kafka_config).await_termination()

    assert _dump(session, keyspace, store_name) == _truth(orders)
    letters = list(deadletters.read_all(session, keyspace, store_name))
    unknown_shop = [o for o in orders if o["status"] != "cancelled" and o["shop"] not in REGIONS]
    assert sorted(d.reason for d in letters) == sorted(
        [deadletters.MISSING_KEY] * (len(unknown_shop) + 1) + [deadletters.MISSING_FIELD]
    )
    raws = {bytes(d.raw) for d in letters}
    assert {b"not json", json.dumps(no_amount).encode(), json.dumps(unknown_shop[0]).encode()} <= raws
    assert registry.input_settings(session, keyspace, store_name) == registry.InputSettings(
        "own-query", (), "concat(region, '/', shop)", "ts"
    )

    # Keyed otherwise, by this query or by the job reading the topic as JSON: refused, nothing written.
    before = _dump(session, keyspace, store_name)
    source = spark.readStream.format("kafka").option("kafka.bootstrap.servers", kafka_config.bootstrap_servers)
    frame = own_aggregation.orders_by_shop(
        source.option("subscribe", topic).load(),
        spark.createDataFrame(own_aggregation.SHOPS, "shop string, region string"),
    )
    refused = "reads its records with --input-format own-query --key-expr \"concat\\(region, '/', shop\\)\""
    with pytest.raises(StoreMismatchError, match=refused):
        start_aggregation(
            frame,
            store=store_name,
            measures=own_aggregation.MEASURES,
            key="shop",
            time="ts",
            checkpoint=str(checkpoint),
            cassandra=cassandra_config,
            kafka=kafka_config,
        )
    json_job = {"input_format": "json", "aggregate": own_aggregation.MEASURES, "key": "shop", "time_field": "ts"}
    with pytest.raises(StoreMismatchError, match=refused):
        run_stream(spark, cassandra_config, kafka_config, topic, store_name, checkpoint, **json_job)
    assert _dump(session, keyspace, store_name) == before
