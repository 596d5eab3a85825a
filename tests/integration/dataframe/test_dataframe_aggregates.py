"""The livestate data source over an aggregate store on the real stack: a typed column per
measure (sum_int as decimal(38,0), exact past a long; latest as the field's JSON text), with key
filters pushed and measure filters left to Spark."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pyspark.sql import functions as F

from statestore.dataframe import register
from tests.integration import aggregate_stores
from tests.integration.aggregate_stores import BIG, MINUTE, START

LATEST_TEXT = {"alice": '"Zürich"', "bob": '{"id": 7}', "carol": "42", "dave": None}


@pytest.fixture(scope="module")
def livestate(spark):
    register(spark)
    return spark


@pytest.fixture(scope="module")
def orders(session, keyspace):
    aggregate_stores.fill(session, keyspace, "df_orders_global", partitions=None)
    return aggregate_stores.fill(session, keyspace, "df_orders")[1]


def _frame(spark, keyspace: str, store: str, **options):
    reader = spark.read.format("livestate").option("store", store).option("keyspace", keyspace)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _expected(results: dict, key: str) -> tuple:
    r = results[key]
    return (key, r["n"], r["total"], Decimal(r["units"]), r["lo"], r["hi"], LATEST_TEXT[key])


def test_a_typed_column_per_measure_with_key_filters_pushed(livestate, keyspace, orders):
    df = _frame(livestate, keyspace, "df_orders")
    assert df.schema.simpleString() == (
        "struct<key:string,n:bigint,total:double,units:decimal(38,0),lo:double,hi:double,city:string,"
        "users:double,batch_id:bigint,time:timestamp>"
    )
    measures = ["key", "n", "total", "units", "lo", "hi", "city"]
    read = df.select(*measures, "users").collect()
    rows = sorted(tuple(r)[:-1] for r in read)
    assert rows == [_expected(orders, k) for k in sorted(orders)]
    assert Decimal(BIG) in (r.units for r in read)  # exact, past a long
    assert {r.key: r.users for r in read} == {k: pytest.approx(orders[k]["users"]) for k in orders}
    # global store: the same rows, read by token range
    every = _frame(livestate, keyspace, "df_orders_global", splits=4).select(*measures).collect()
    assert sorted(tuple(r) for r in every) == rows

    pushed = _frame(livestate, keyspace, "df_orders", pushdown="true").filter(F.col("key") == "bob")
    assert pushed.rdd.getNumPartitions() == 1  # the key's Cassandra partition only
    assert [tuple(r) for r in pushed.select(*measures).collect()] == [_expected(orders, "bob")]
    busy = _frame(livestate, keyspace, "df_orders", pushdown="true").filter((F.col("n") > 4) & (F.col("key") < "d"))
    assert sorted(r.key for r in busy.collect()) == ["alice", "bob"]  # n by Spark, key by the table


def test_a_window_aggregate_store_has_a_column_per_measure_beside_its_window(livestate, session, keyspace):
    windows = aggregate_stores.fill_windows(session, keyspace, "df_window_orders")[1]
    df = _frame(livestate, keyspace, "df_window_orders")
    assert df.schema.simpleString() == (
        "struct<key:string,window_start:timestamp,window_end:timestamp,n:bigint,total:double,units:decimal(38,0),"
        "lo:double,hi:double,city:string,users:double,batch_id:bigint,time:timestamp>"
    )
    starts = [F.unix_millis("window_start").alias("s"), F.unix_millis("window_end").alias("e")]
    columns = ["key", *starts, "n", "total", "units", "lo", "hi"]
    read = sorted(tuple(r) for r in df.select(*columns).collect())
    expected = [
        (k, s, s + MINUTE, r["n"], r["total"], Decimal(r["units"]), r["lo"], r["hi"])
        for (k, s), r in sorted(windows.items())
    ]
    assert read == expected
    pushed = _frame(livestate, keyspace, "df_window_orders", pushdown="true").filter(
        (F.col("key") == "alice") & (F.col("window_start") >= F.timestamp_millis(F.lit(START + 2 * MINUTE)))
    )
    assert pushed.rdd.getNumPartitions() == 1  # the key's partitions only, as for the word count's windows
    assert [tuple(r) for r in pushed.select(*columns).collect()] == [
        e for e in expected if e[:2] == ("alice", START + 2 * MINUTE)
    ]


def test_a_session_aggregate_store_has_a_column_per_measure_beside_its_session(livestate, session, keyspace):
    sessions = aggregate_stores.fill_sessions(session, keyspace, "df_session_orders")[1]
    df = _frame(livestate, keyspace, "df_session_orders")
    assert df.schema.simpleString() == (
        "struct<key:string,session_start:timestamp,session_end:timestamp,n:bigint,total:double,"
        "units:decimal(38,0),lo:double,hi:double,city:string,users:double,batch_id:bigint,time:timestamp>"
    )
    bounds = [F.unix_millis("session_start").alias("s"), F.unix_millis("session_end").alias("e")]
    columns = ["key", *bounds, "n", "total", "units", "lo", "hi", "city"]
    read = sorted(tuple(r) for r in df.select(*columns).collect())
    latest = {"alice": '"Zürich"', "carol": "42", "bob": '{"id": 7}', "dave": None}  # the accumulators' own
    expected = [
        (k, s, e, r["n"], r["total"], Decimal(r["units"]), r["lo"], r["hi"], latest[_source(r)])
        for (k, s, e), r in sorted(sessions.items())
    ]
    assert read == expected
    pushed = _frame(livestate, keyspace, "df_session_orders", pushdown="true").filter(
        (F.col("key") == "alice") & (F.col("session_end") >= F.timestamp_millis(F.lit(START + MINUTE)))
    )
    assert pushed.rdd.getNumPartitions() == 1  # the key's partitions only, as for the word count's sessions
    assert [tuple(r) for r in pushed.select(*columns).collect()] == [
        e for e in expected if e[0] == "alice" and e[2] >= START + MINUTE
    ]


def _source(results: dict) -> str:
    """Which of aggregate_stores.ACCUMULATORS a session's results are (they are copied whole)."""
    return {5: "alice", 9: "bob" if results["units"] == 4 else "dave", 2: "carol"}[results["n"]]
