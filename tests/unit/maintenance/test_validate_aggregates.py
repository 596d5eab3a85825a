"""The rules an aggregate store's validation compares by (pure): each measure against the
recount of its input, by its aggregation's rule, and the per-entry problems the Great
Expectations suite expects none of."""

from __future__ import annotations

import json
from unittest import mock

import datasketches as ds
import pytest

from statestore.core.aggregation import AggregateSpec
from statestore.core.aggregation.kinds.latest import LatestValue
from statestore.core.errors import UnsupportedOperationError
from statestore.core.model import StoreSpec
from statestore.maintenance.validate import idempotency
from statestore.maintenance.validate.recount_aggregates import (
    Finding,
    entry_problems,
    judge_entry,
    measures_checked,
)
from statestore.store.book import registry
from statestore.store.book.registry import InputSettings

SPEC = AggregateSpec.parse(
    "n=count(), total=sum_int(amount), s=sum(amount), lo=min(amount), hi=max(amount), last=latest(pos), "
    "u=distinct(user)"
)


def _sketch(values) -> bytes:
    sketch = ds.hll_sketch(12, ds.tgt_hll_type.HLL_8)
    for value in values:
        sketch.update(str(value))
    return sketch.serialize_compact()


def _merged(*parts) -> bytes:
    union = ds.hll_union(12)
    for part in parts:
        union.update(ds.hll_sketch.deserialize(part))
    return union.get_result(ds.tgt_hll_type.HLL_8).serialize_compact()


def _accs(n=3, total=12, s=12.0, lo=1.0, hi=8.0, last=None, u=None) -> tuple:
    return (n, total, s, lo, hi, last or LatestValue(5, 0, 9, '{"x":1}'), u if u is not None else _sketch("abc"))


def _judge(stored: tuple | None, expected: tuple | None, stored_time=5, expected_time=5, **expiry) -> list[Finding]:
    value = None if stored is None else SPEC.pack(stored)
    return list(judge_entry(SPEC, value, stored_time, expected, expected_time, **expiry))


def test_an_entry_equal_to_its_recount_passes():
    assert _judge(_accs(), _accs()) == []


def test_count_sum_int_min_max_and_latest_are_compared_exactly_and_the_measure_named():
    assert _judge(_accs(n=4), _accs()) == [Finding("measure", "n", 4, 3)]
    assert _judge(_accs(total=2**70 + 1), _accs(total=2**70)) == [Finding("measure", "total", 2**70 + 1, 2**70)]
    assert _judge(_accs(lo=0.5, hi=8.5), _accs()) == [
        Finding("measure", "lo", 0.5, 1.0),
        Finding("measure", "hi", 8.5, 8.0),
    ]
    other = LatestValue(5, 0, 9, '{"x":2}')
    assert _judge(_accs(last=other), _accs()) == [Finding("measure", "last", {"x": 2}, {"x": 1})]


def test_a_double_sum_is_compared_within_a_relative_1e_9():
    assert _judge(_accs(s=0.1 + 0.2), _accs(s=0.3)) == []  # Spark adds in an order of its own
    assert _judge(_accs(s=1e12 + 1.0), _accs(s=1e12)) == []
    assert _judge(_accs(s=1e12 + 1e4), _accs(s=1e12)) == [Finding("measure", "s", 1e12 + 1e4, 1e12)]


def test_distinct_compares_the_registers_not_the_history_of_the_sketch():
    values = [f"user{i}" for i in range(3000)]
    one_pass = _sketch(values)  # as Spark's hll_sketch_agg over every record
    through_merges = _merged(_sketch(values[::2]), _sketch(values[1::2]))  # as the stream's batches
    bare = [ds.hll_sketch.deserialize(b).get_estimate() for b in (one_pass, through_merges)]
    assert bare[0] != bare[1]  # the same registers, two estimates
    assert _judge(_accs(u=through_merges), _accs(u=one_pass)) == []
    (found,) = _judge(_accs(u=_merged(through_merges, _sketch(f"more{i}" for i in range(300)))), _accs(u=one_pass))
    assert (found.kind, found.measure) == ("measure", "u")


def test_missing_unexpected_unreadable_and_a_wrong_time_are_named():
    assert _judge(None, _accs()) == [Finding("missing", expected=SPEC.finish(_accs()))]
    assert _judge(_accs(), None) == [Finding("unexpected", stored=SPEC.finish(_accs()))]
    assert [f.kind for f in judge_entry(SPEC, b"\x00\x00", 5, _accs(), 5)] == ["unreadable"]
    assert _judge(_accs(), _accs(), stored_time=4, expected_time=5) == [Finding("time", stored=4, expected=5)]


def test_after_expiry_a_key_with_input_before_the_cutoff_is_not_compared():
    assert _judge(_accs(n=1), _accs(), first_ms=1, cutoff_ms=3) == []  # forgotten and counted anew
    assert _judge(_accs(n=1), _accs(), first_ms=3, cutoff_ms=3) == [Finding("measure", "n", 1, 3)]
    assert _judge(None, _accs(), expected_time=2, first_ms=1, cutoff_ms=3) == []  # all before it: expired
    assert [f.kind for f in _judge(None, _accs(), expected_time=3, first_ms=1, cutoff_ms=3)] == ["missing"]


def test_entry_problems_are_aggregate_spec_problems_and_none_for_a_sound_entry():
    assert entry_problems(SPEC, SPEC.pack(_accs())) is None
    assert entry_problems(SPEC, SPEC.pack(_accs(n=-1, lo=9.0))) == "count -1 is negative; lo 9.0 is above hi 8.0"
    assert "not a value of" in entry_problems(SPEC, b"\x00")


def test_the_report_names_each_measure_and_how_it_was_compared():
    checked = {m["measure"]: m["compared"] for m in measures_checked(SPEC)}
    assert list(checked) == ["n", "total", "s", "lo", "hi", "last", "u"]
    assert checked["n"] == "exact" and "1e-09 relative" in checked["s"] and "registers" in checked["u"]


def test_validation_reads_an_aggregate_store_with_its_recorded_settings_or_says_why_it_cannot(monkeypatch):
    spec = StoreSpec("ks", "spend", "partitioned-kv", 2, value_codec=SPEC.value_format)
    recorded = {}
    monkeypatch.setattr(registry, "input_settings", lambda session, keyspace, name: recorded.get(name))
    assert idempotency._aggregate_stage(None, StoreSpec("ks", "words", "partitioned-kv", 2)) is None  # a word count
    with pytest.raises(UnsupportedOperationError, match="run its stream job once"):
        idempotency._aggregate_stage(None, spec)
    recorded["spend"] = InputSettings("own-query", (), "shop", None)
    with pytest.raises(UnsupportedOperationError, match="input format own-query"):
        idempotency._aggregate_stage(None, spec)
    recorded["spend"] = InputSettings("json", ("shop",), None, "ts")
    stage = idempotency._aggregate_stage(None, spec)
    assert (stage.aggregate, stage.key_fields, stage.time_field) == (SPEC, ("shop",), "ts")


def test_window_and_session_aggregate_stores_are_validated(monkeypatch):
    from statestore.core.windows import SessionSpec, WindowSpec

    settings = InputSettings("json", ("shop",), None, "ts")
    monkeypatch.setattr(registry, "input_settings", lambda session, keyspace, name: settings)
    windows = StoreSpec(
        "ks", "spend", "partitioned-window", 2, value_codec=SPEC.value_format, windowing=WindowSpec(60_000)
    )
    assert idempotency._aggregate_stage(None, windows).aggregate == SPEC
    sessions = StoreSpec(
        "ks", "visits", "partitioned-session", 2, value_codec=SPEC.value_format, windowing=SessionSpec(30_000)
    )
    assert idempotency._aggregate_stage(None, sessions).aggregate == SPEC
    versioned = StoreSpec("ks", "v", "partitioned-versioned", 2, value_codec=SPEC.value_format)
    with pytest.raises(UnsupportedOperationError, match="partitioned-versioned stores are not validated"):
        idempotency._aggregate_stage(None, versioned)


def test_the_report_of_a_window_aggregate_store_names_each_difference_by_key_and_window():
    from statestore.maintenance.validate import report as validate_report

    result = idempotency.RecomputeResult(
        passed=False,
        topics=["t"],
        starting_offsets="earliest",
        ending_offsets="{}",
        last_batch_id=3,
        expired_before_ms=None,
        input_words=9,
        words_at_least=9,
        input_keys=4,
        store_entries=4,
        store_sum=None,
        differences=1,
        counted_per="window",
        measures=measures_checked(SPEC),
        uncountable=2,
        first_differences=[idempotency.Difference("shop1", "measure", -1, 3, None, 5, 5, 60_000, 120_000, "n")],
    )
    text = "\n".join(validate_report._aggregate_recompute(result) + validate_report._differences(result))
    assert "(key, window) pairs in the input" in text and "late in a window" in text
    assert "| shop1 | [60000, 120000] | measure | n | -1 | 3 |" in text
    shown = idempotency._show(result.first_differences[0])
    assert shown == "'shop1' in [60000, 120000] (measure n: store -1, input 3)"


def test_the_report_of_a_session_aggregate_store_names_each_difference_by_key_and_session():
    from statestore.maintenance.validate import report as validate_report

    result = idempotency.RecomputeResult(
        passed=False,
        topics=["t"],
        starting_offsets="earliest",
        ending_offsets="{}",
        last_batch_id=3,
        expired_before_ms=None,
        input_words=9,
        words_at_least=9,
        input_keys=4,
        store_entries=4,
        store_sum=None,
        differences=1,
        counted_per="session",
        measures=measures_checked(SPEC),
        uncountable=2,
        first_differences=[idempotency.Difference("shop1", "measure", -1, 3, None, 5, 5, 1_000, 31_000, "n")],
    )
    text = "\n".join(validate_report._aggregate_recompute(result) + validate_report._differences(result))
    assert "(key, session) pairs in the input" in text and "or late (dead letters)" in text
    assert "| key | session | kind |" in text and "| shop1 | [1000, 31000] | measure | n | -1 | 3 |" in text
    shown = idempotency._show(result.first_differences[0])
    assert shown == "'shop1' in [1000, 31000] (measure n: store -1, input 3)"


def test_the_session_recount_sessionizes_each_keys_on_time_records_by_the_gap(spark):
    """recount_session_aggregates_of against a brute force: each key's countable records that no
    late letter judged late, merged by the gap, each session's measures those of its records."""
    from types import SimpleNamespace

    from statestore.core.windows import SessionSpec
    from statestore.store.book.registry import StoreProgress
    from statestore.stream import aggregates
    from statestore.stream.json_input import JsonInput

    stage = JsonInput(AggregateSpec.parse("n=count(), total=sum_int(amount), hi=max(amount)"), ("shop",), None, "ts")
    gap, grace = 10_000, 2_000
    spec = SimpleNamespace(windowing=SessionSpec(gap, grace, retention_ms=100_000), keyspace="ks", name="visits")
    events = [("a", 0, 5), ("a", 10_000, 7), ("a", 20_001, 1), ("b", 3_000, 2), ("a", 25_000, 4), ("b", 1_000, 9)]
    events += [("a", 15_000, 100), ("b", 2_000, 50)]  # late: judged at stream times 20_000 and 4_000
    late = {6: 20_000, 7: 3_999}  # the second's letter did not find it late (time + grace >= stream time)
    events.append(("a", -1_000, 8))  # before 1970: no session holds it
    rows = [
        (None, json.dumps({"shop": k, "amount": a, "ts": t}).encode(), "t", 0, i, None, 0)
        for i, (k, t, a) in enumerate(events)
    ]
    rows.append((None, b"not json", "t", 0, len(events), None, 0))
    records = spark.createDataFrame(rows, idempotency._KAFKA_ROWS)
    letters = spark.createDataFrame(
        [("t", 0, offset, at) for offset, at in late.items()],
        "topic string, partition int, offset long, late_at_ms long",
    )
    progress = StoreProgress(None, None, None, None, None, 0, None, None, None, None, None)
    with mock.patch.object(idempotency.validate_timed, "late_records", lambda spark, session, spec: letters):
        found = idempotency.recount_session_aggregates_of(spark, None, spec, records, stage, progress).collect()
    by_session = {
        (r.key, r.session_start, r.session_end): aggregates.delta_of(
            (r.key, r.records, r.time_ms, r.m0, r.m1, r.m2), stage.aggregate
        )
        for r in found
        if r.key is not None
    }
    results = {s: stage.aggregate.finish(d.accumulators) for s, d in by_session.items()}
    assert results == {
        ("a", 0, 10_000): {"n": 2, "total": 12, "hi": 7},  # exactly the gap apart: one session
        ("a", 20_001, 25_000): {"n": 2, "total": 5, "hi": 4},  # more than the gap past 10_000 (15_000 late)
        ("b", 1_000, 3_000): {"n": 3, "total": 61, "hi": 50},
    }
    assert {s: d.time_ms for s, d in by_session.items()} == {s: s[2] for s in by_session}  # the latest: the end
    uncounted = [r for r in found if r.key is None]
    assert [r.records for r in uncounted] == [3]  # the late one, the one before 1970 and the unparsable one
