"""The JSON input stage and the batch's partials, on Spark in local mode: each bad record gets
the reason the design names (and nothing of it is counted), each good one its key, time and
typed values; the partials merge to a brute-force truth."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from statestore.core.aggregation import AggregateSpec
from statestore.store.book import deadletters
from statestore.stream import aggregates
from statestore.stream.json_input import JsonInput, dead_letter_rows, measure_columns, parsed_records
from statestore.stream.transforms import with_future_limit

SPEC = AggregateSpec.parse(
    "n=count(), total=sum_int(amount), s=sum(amount), hi=max(amount), lo=min(amount), "
    "last=latest(pos), u=distinct(user)"
)
KAFKA = "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, timestampType int"
NOW_MS = 1_795_946_400_000  # 2026-11-29T10:00:00Z
WRITE_TS = NOW_MS * 1000


def _batch(spark, values, partition=0):
    when = datetime.fromtimestamp(NOW_MS / 1000, UTC)
    rows = [
        (None, v if isinstance(v, bytes | type(None)) else v.encode(), "t", partition, i, when, 0)
        for i, v in enumerate(values)
    ]
    return with_future_limit(spark.createDataFrame(rows, KAFKA), WRITE_TS, 300_000)


def _parsed(spark, values, spec: JsonInput):
    return {r.offset: r for r in parsed_records(_batch(spark, values), spec).collect()}


BAD = [
    (None, deadletters.NULL_VALUE, "no value"),
    (b"\xff{}", deadletters.INVALID_UTF8, "UTF-8"),
    ("not json", deadletters.INVALID_JSON, "not JSON"),
    ("[1, 2]", deadletters.INVALID_JSON, "no object (a ARRAY)"),
    ('{"amount": 1, "pos": 1, "ts": 5}', deadletters.MISSING_KEY, "user"),
    ('{"user": null, "amount": 1, "pos": 1, "ts": 5}', deadletters.MISSING_KEY, "user"),
    ('{"user": "", "amount": 1, "pos": 1, "ts": 5}', deadletters.MISSING_KEY, "empty"),
    ('{"user": "' + "x" * 70_000 + '", "amount": 1, "pos": 1, "ts": 5}', deadletters.KEY_TOO_LONG, "70000 bytes"),
    ('{"user": "a", "pos": 1, "ts": 5}', deadletters.MISSING_FIELD, "field amount"),
    ('{"user": "a", "amount": null, "pos": 1, "ts": 5}', deadletters.MISSING_FIELD, "field amount"),
    ('{"user": "a", "amount": 1, "ts": 5}', deadletters.MISSING_FIELD, "field pos"),
    (
        '{"user": "a", "amount": "12", "pos": 1, "ts": 5}',
        deadletters.WRONG_TYPE,
        "field amount: expected an integer, found STRING",
    ),
    ('{"user": "a", "amount": 1.5, "pos": 1, "ts": 5}', deadletters.WRONG_TYPE, "found DECIMAL(2,1) 1.5"),
    ('{"user": "a", "amount": true, "pos": 1, "ts": 5}', deadletters.WRONG_TYPE, "BOOLEAN"),
    ('{"user": "a", "amount": 9223372036854775808, "pos": 1, "ts": 5}', deadletters.OVERFLOW, "fit a 64-bit long"),
    ('{"user": "a", "amount": 1e400, "pos": 1, "ts": 5}', deadletters.OVERFLOW, "does not fit a 64-bit long"),
    ('{"user": "a", "amount": 1, "pos": 1, "ts": "later"}', deadletters.WRONG_TYPE, "time field ts"),
    ('{"user": "a", "amount": 1, "pos": 1}', deadletters.MISSING_FIELD, "time field ts"),
    ('{"user": "a", "amount": 1, "pos": 1, "ts": 1e30}', deadletters.OVERFLOW, "time field ts"),
    ('{"user": "a", "amount": 1, "pos": 1, "ts": [1]}', deadletters.WRONG_TYPE, "found ARRAY"),
    (f'{{"user": "a", "amount": 1, "pos": 1, "ts": {NOW_MS + 300_001}}}', deadletters.FUTURE, "--max-future"),
]


def test_every_bad_record_gets_its_reason_and_no_value(spark):
    spec = JsonInput(SPEC, ("user",), time_field="ts")
    parsed = _parsed(spark, [value for value, _, _ in BAD], spec)
    for offset, (value, reason, detail) in enumerate(BAD):
        row = parsed[offset]
        assert (row.reason, row.key is None or row.reason is not None) == (reason, True), value
        assert detail in row.detail, (value, row.detail)
        assert all(row[c] is None for c in ("v0", "v1", "v2", "v3")), value  # nothing of it is counted
    letters = dead_letter_rows(parsed_records(_batch(spark, [v for v, _, _ in BAD]), spec)).collect()
    assert sorted(r.offset for r in letters) == list(range(len(BAD)))


def test_each_batch_judges_by_its_own_future_limit_with_the_code_the_first_compiled(spark):
    """The future limit is no constant of Spark's generated code: a batch with another limit
    runs the code the first batch compiled (compiling each batch's own cost the JVM most of a
    second per batch), and still judges by its own limit. From a shuffle, as a Kafka batch: a
    plan over local rows is evaluated without generated code."""
    compiled = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    spec = JsonInput(SPEC, ("user",), time_field="ts")
    when = datetime.fromtimestamp(NOW_MS / 1000, UTC)
    times = (NOW_MS, NOW_MS + 300_001, NOW_MS + 400_001)
    values = [f'{{"user": "a", "amount": 1, "pos": 1, "ts": {ts}}}'.encode() for ts in times]
    rows = spark.createDataFrame([(None, v, "t", 0, i, when, 0) for i, v in enumerate(values)], KAFKA).repartition(2)

    def judged(max_future_ms):
        parsed = parsed_records(with_future_limit(rows, WRITE_TS, max_future_ms), spec).collect()
        return [(r.reason, r.detail) for r in sorted(parsed, key=lambda r: r.offset)]

    assert [reason for reason, _ in judged(300_000)] == [None, deadletters.FUTURE, deadletters.FUTURE]
    before = compiled.getCount()
    later = judged(400_000)
    assert compiled.getCount() == before
    assert later[:2] == [(None, None), (None, None)]
    assert later[2][0] == deadletters.FUTURE
    assert later[2][1].startswith(f"its time is after {NOW_MS + 400_000} ms, its batch's clock plus the tolerance")


def test_a_number_field_read_by_sum_takes_decimals_and_floats_and_refuses_infinity(spark):
    spec = JsonInput(AggregateSpec.parse("s=sum(amount)"), ("user",))
    parsed = _parsed(
        spark, ['{"user": "a", "amount": 1.5}', '{"user": "a", "amount": 1e3}', '{"user": "a", "amount": -1e400}'], spec
    )
    assert [(parsed[i].reason, parsed[i].v0) for i in range(3)] == [
        (None, 1.5),
        (None, 1000.0),
        (deadletters.OVERFLOW, None),
    ]


def test_keys_times_and_typed_values_of_good_records(spark):
    values = [
        '{"user": "alice", "amount": 12.0, "pos": {"x": 1}, "ts": "2026-11-29T09:00:00Z"}',
        '{"user": 42, "amount": -3, "pos": "here", "ts": 1795942800123}',
        '{"user": "b", "amount": 9223372036854775807, "pos": null, "ts": "2026-11-29T10:00:00.5+01:00"}',
    ]
    spec = JsonInput(AggregateSpec.parse("t=sum_int(amount), s=sum(amount), l=latest(pos)"), ("user",), time_field="ts")
    parsed = _parsed(spark, values, spec)
    columns = measure_columns(spec.aggregate)
    assert parsed[2].reason == deadletters.MISSING_FIELD  # a JSON null is missing
    got = [(r.key, r.time_ms, r[columns["t"]], r[columns["s"]], r[columns["l"]]) for r in (parsed[0], parsed[1])]
    assert got == [("alice", NOW_MS - 3_600_000, 12, 12.0, '{"x":1}'), ("42", 1795942800123, -3, -3.0, '"here"')]


def test_several_key_fields_make_a_json_array_and_a_key_expression_any_text(spark):
    value = '{"shop": "s1", "user": {"id": 7}, "amount": 1}'
    several = _parsed(spark, [value], JsonInput(AggregateSpec.parse("n=count()"), ("shop", "user.id")))
    assert several[0].key == '["s1",7]'
    expr = "concat(record:shop::string, '/', record:user.id::string)"
    by_expr = _parsed(spark, [value], JsonInput(AggregateSpec.parse("n=count()"), key_expr=expr))
    assert by_expr[0].key == "s1/7"


def test_the_partials_of_a_batch_merge_to_the_brute_force_truth(spark):
    events = [{"user": f"u{i % 3}", "amount": i * 7 - 20, "pos": i} for i in range(30)]
    values = [json.dumps(e) for e in events] + ["broken", '{"user": "u0"}']
    spec = JsonInput(SPEC, ("user",))
    rows = aggregates.partials(parsed_records(_batch(spark, values), spec), spec).toArrow()
    stats = []

    def applier(rows_in):
        deltas = [d for part in aggregates.slices_of(rows_in, SPEC) for d in part]
        stats.extend(deltas)
        yield aggregates.ApplyStats(keys=len(deltas))

    total = aggregates.run_on_driver(rows, applier)
    assert total.uncountable == 2 and total.keys == 3
    for delta in stats:
        mine = [e for e in events if e["user"] == delta.key.decode()]
        result = SPEC.finish(delta.accumulators)
        amounts = [e["amount"] for e in mine]
        assert delta.records == len(mine)
        assert (result["n"], result["total"], result["s"], result["hi"], result["lo"]) == (
            len(mine),
            sum(amounts),
            float(sum(amounts)),
            float(max(amounts)),
            float(min(amounts)),
        )
        assert result["last"] == max(mine, key=lambda e: e["pos"])["pos"]  # same time and partition: by offset
        assert round(result["u"]) == 1


@pytest.mark.parametrize("expr", ["no_such_function(record)", "concat(record:a::string,"])
def test_a_key_expression_spark_cannot_use_is_refused_before_the_store_is_touched(spark, expr):
    from statestore.core.errors import ConfigError
    from statestore.stream.job import check_json_input

    with pytest.raises(ConfigError, match="--key-expr"):
        check_json_input(spark, JsonInput(AggregateSpec.parse("n=count()"), key_expr=expr))
