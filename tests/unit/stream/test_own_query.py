"""Your own query into an aggregate store (statestore.stream.own_query), on Spark in local mode
without services: the user's columns map to the rows the aggregate stage takes (keys, times,
typed values, the dead-letter reasons of null keys and fields), and what cannot work is refused
before anything starts: another source than one Kafka topic, lost Kafka columns, a column of a
type its measure cannot take."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from pyspark.sql import functions as F

from statestore.core.aggregation import AggregateSpec
from statestore.core.config import CassandraConfig
from statestore.core.errors import ConfigError
from statestore.store.book import deadletters
from statestore.stream import aggregates
from statestore.stream.json_input import dead_letter_rows, measure_columns
from statestore.stream.own_query import kafka_topic, stage, start_aggregation
from statestore.stream.transforms import with_future_limit

NOW_MS = 1_795_946_400_000  # 2026-11-29T10:00:00Z
WRITE_TS = NOW_MS * 1000
ORDERS = (
    "topic string, partition int, offset bigint, timestamp timestamp, shop string, qty int, price double, "
    "big decimal(20,0), customer string, at timestamp"
)
SPEC = AggregateSpec.parse(
    "n=count(), units=sum_int(qty), revenue=sum(price), hi=max(price), last=latest(customer), who=distinct(customer)"
)


def _orders(spark, rows):
    when = datetime.fromtimestamp(NOW_MS / 1000, UTC)
    full = [("orders", 0, i, when, *row) for i, row in enumerate(rows)]
    return spark.createDataFrame(full, ORDERS)


def _parsed(spark, rows, spec=SPEC, **options):
    staged, records = stage(_orders(spark, rows), spec, **{"key": "shop", **options})
    parsed = records.parsed_records(with_future_limit(staged, WRITE_TS, 300_000))
    return parsed, {r.offset: r for r in parsed.collect()}


def _kafka(spark, topic="orders", **options):
    reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:1")
    for name, value in {"subscribe": topic, **options}.items():
        if value is not None:
            reader = reader.option(name, value)
    return reader.load()


def test_the_users_columns_become_the_aggregate_stages_rows(spark):
    at = datetime.fromtimestamp((NOW_MS - 60_000) / 1000, UTC)
    _, rows = _parsed(
        spark,
        [("s1", 2, 9.5, Decimal(1), "ann", at), ("s1", 3, 0.5, Decimal(1), "bob", at)],
        time="at",
    )
    columns = measure_columns(SPEC)
    got = [(r.key, r.time_ms, r[columns["units"]], r[columns["revenue"]], r[columns["last"]]) for r in rows.values()]
    assert got == [("s1", NOW_MS - 60_000, 2, 9.5, '"ann"'), ("s1", NOW_MS - 60_000, 3, 0.5, '"bob"')]
    assert all(r.reason is None for r in rows.values())


def test_the_partials_of_a_users_batch_merge_to_the_brute_force_truth(spark):
    orders = [(f"s{i % 3}", i, i * 1.5, Decimal(i), f"c{i % 4}", None) for i in range(30)]
    parsed, _ = _parsed(spark, [*orders, (None, 1, 1.0, Decimal(1), "x", None)])
    partials = aggregates.partials(parsed, type("Records", (), {"aggregate": SPEC})).toArrow()
    got = {}
    for row in zip(*(c.to_pylist() for c in partials.columns), strict=True):
        if row[0] is not None:
            got[row[0]] = SPEC.finish(aggregates.delta_of(row, SPEC).accumulators)
    for shop in ("s0", "s1", "s2"):
        mine = [o for o in orders if o[0] == shop]
        expected = {
            "n": len(mine),
            "units": sum(o[1] for o in mine),
            "revenue": sum(o[2] for o in mine),
            "hi": max(o[2] for o in mine),
            "last": mine[-1][4],  # same time: the last offset wins
            "who": len({o[4] for o in mine}),
        }
        assert {**got[shop], "who": round(got[shop]["who"])} == expected, shop


def test_a_null_key_or_field_is_a_dead_letter_with_its_reason(spark):
    bad = [
        (None, 1, 1.0, Decimal(1), "a", None),
        ("", 1, 1.0, Decimal(1), "a", None),
        ("s", None, 1.0, Decimal(1), "a", None),
        ("s", 1, None, Decimal(1), "a", None),
        ("s", 1, 1.0, Decimal(1), None, None),
        ("s", 1, float("nan"), Decimal(1), "a", None),
        ("s", 1, float("inf"), Decimal(1), "a", None),
    ]
    parsed, rows = _parsed(spark, bad)
    reasons = [(rows[i].reason, rows[i].detail.split(";")[0]) for i in range(len(bad))]
    assert reasons == [
        (deadletters.MISSING_KEY, "the key shop is null"),
        (deadletters.MISSING_KEY, "the key shop is empty"),
        (deadletters.MISSING_FIELD, "field qty is null"),
        (deadletters.MISSING_FIELD, "field price is null"),
        (deadletters.MISSING_FIELD, "field customer is null"),
        (deadletters.WRONG_TYPE, "field price: expected a number, found NaN"),
        (deadletters.OVERFLOW, "field price: Infinity is beyond a double"),
    ]
    assert all(r[c] is None for r in rows.values() for c in measure_columns(SPEC).values() if c)
    letters = dead_letter_rows(parsed).collect()
    assert sorted(r.offset for r in letters) == list(range(len(bad)))
    # The frame kept no Kafka value: the row's key and fields as JSON.
    assert bytes(letters[0].raw) == b'{"key":null,"qty":1,"price":1.0,"customer":"a"}'


def test_a_decimal_beyond_a_long_overflows_and_a_null_time_and_a_future_time_are_dead_letters(spark):
    spec = AggregateSpec.parse("t=sum_int(big)")
    future = datetime.fromtimestamp((NOW_MS + 300_001) / 1000, UTC)
    _, rows = _parsed(
        spark,
        [
            ("s", 1, 1.0, Decimal(2**63), "a", None),
            ("s", 1, 1.0, Decimal(7), "a", future),
            ("s", 1, 1.0, Decimal(7), "a", None),
        ],
        spec=spec,
        time=F.coalesce("at", F.lit(datetime.fromtimestamp(NOW_MS / 1000, UTC))),
    )
    assert (rows[0].reason, rows[1].reason, rows[2].reason) == (deadletters.OVERFLOW, deadletters.FUTURE, None)
    _, rows = _parsed(spark, [("s", 1, 1.0, Decimal(7), "a", None)], spec=spec, time="at")
    assert (rows[0].reason, rows[0].detail.split(";")[0]) == (deadletters.MISSING_FIELD, "the time at is null")


def test_keys_of_other_types_read_as_a_json_records_key_field_does_and_values_map_fields(spark):
    spec = AggregateSpec.parse("total=sum_int(amount)")
    staged, records = stage(
        _orders(spark, [("s", 4, 2.0, Decimal(1), "c", None)]), spec, "qty", values={"amount": F.col("qty") * 10}
    )
    row = records.parsed_records(staged).collect()[0]
    assert (row.key, row[measure_columns(spec)["total"]]) == ("4", 40)


def test_a_column_of_a_type_its_measure_cannot_take_is_refused_naming_both(spark):
    df = _orders(spark, [])
    with pytest.raises(
        ConfigError, match=r"measure units=sum_int\(price\): field price is double, but it takes integers"
    ):
        stage(df, AggregateSpec.parse("units=sum_int(price)"), "shop")
    with pytest.raises(ConfigError, match=r"field customer is string, but it takes numbers"):
        stage(df, AggregateSpec.parse("hi=max(customer)"), "shop")
    with pytest.raises(ConfigError, match="time 'customer' is string"):
        stage(df, SPEC, "shop", time="customer")
    with pytest.raises(ConfigError, match=r"field amount.*cannot resolve"):
        stage(df, AggregateSpec.parse("s=sum(amount)"), "shop")
    with pytest.raises(ConfigError, match="values= names price2, which no measure reads"):
        stage(df, SPEC, "shop", values={"price2": "price"})


def test_a_frame_without_the_kafka_columns_is_refused(spark):
    df = _orders(spark, []).drop("offset", "timestamp")
    with pytest.raises(ConfigError, match="lacks the Kafka source's offset, timestamp"):
        stage(df, SPEC, "shop")
    stage(_orders(spark, []).drop("timestamp"), SPEC, "shop", time="at")  # a time of its own needs no timestamp


def test_only_one_kafka_source_subscribed_to_one_topic_is_taken(spark):
    assert kafka_topic(_kafka(spark).filter("offset > 0")) == "orders"
    static = spark.createDataFrame([("s1", "north")], "shop string, region string")
    assert kafka_topic(_kafka(spark).join(static, F.col("key").cast("string") == F.col("shop"))) == "orders"
    with pytest.raises(ConfigError, match="reads 2 streaming sources"):
        kafka_topic(_kafka(spark).unionByName(_kafka(spark, "other")))
    with pytest.raises(ConfigError, match="subscribe to one topic"):
        kafka_topic(_kafka(spark, "a,b"))
    with pytest.raises(ConfigError, match="subscribe to one topic"):
        kafka_topic(_kafka(spark, None, subscribePattern="o.*"))
    with pytest.raises(ConfigError, match="streaming source is rate"):
        kafka_topic(spark.readStream.format("rate").load())
    with pytest.raises(ConfigError, match="not a batch one"):
        kafka_topic(_orders(spark, []))


def test_a_refused_query_touches_no_store(spark, caplog):
    """Refused before Cassandra is asked anything: the configured node does not exist. A source
    without startingOffsets is warned of first: Spark's default skips what the topic holds."""
    nowhere = CassandraConfig(hosts=("127.0.0.1",), port=1, keyspace="nowhere")
    with pytest.raises(ConfigError, match="field price is double"):
        start_aggregation(
            _kafka(spark).withColumn("price", F.lit(1.5)),
            store="s",
            measures="t=sum_int(price)",
            key="key",
            checkpoint="/tmp/x",
            cassandra=nowhere,
        )
    assert "sets no startingOffsets" in caplog.text


def test_the_stream_package_offers_start_aggregation_and_executors_do_not_import_it():
    from statestore.stream import start_aggregation as offered

    assert offered is start_aggregation
    probe = "import sys, statestore.stream.apply, statestore.stream.aggregates; print('own_query' in str(sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_recovery_and_validation_never_read_an_own_querys_store_as_json():
    """They read a store's topic again with its recorded settings (batches.stored_json_input):
    an own query's settings name the user's columns, which no JSON record has."""
    from statestore.store.book.registry import InputSettings
    from statestore.stream.batches import stored_json_input
    from statestore.stream.own_query import OWN_QUERY_FORMAT

    own = InputSettings(OWN_QUERY_FORMAT, (), "concat(region, '/', shop)", "ts")
    assert stored_json_input(SPEC.value_format, own) is None
    assert stored_json_input(SPEC.value_format, InputSettings("json", ("shop",))) is not None


def test_a_with_block_stops_the_query_recording_its_error_as_the_streams_failure():
    from statestore.stream.own_query import AggregationQuery

    class Running:
        query = None

        def __init__(self):
            self.stopped = []

        def stop(self, failure=None):
            self.stopped.append(failure)

    running = Running()
    with AggregationQuery(running):
        pass
    with pytest.raises(RuntimeError), AggregationQuery(running):
        raise RuntimeError("the user's code failed")
    assert running.stopped == [None, "the user's code failed"]
