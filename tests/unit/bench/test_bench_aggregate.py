"""The aggregate benchmark's JSON events and ground truth (bench/streaming_compare/compare/events.py),
the check of what a system kept against it, and its command line (streaming_compare.py --aggregate)."""

from __future__ import annotations

import json

import pytest
from compare.events import (
    MEASURES,
    check_aggregates,
    generate_events,
    truth_from_json,
    truth_of,
    truth_to_json,
)
from streaming_compare import TIMED_SYSTEMS, parse_args

from statestore.core.aggregation import AggregateSpec


@pytest.fixture(scope="module")
def corpus():
    return generate_events(n_events=30_000, users=2_000, zipf_s=1.0, seed=5, span_ms=60_000)


def test_the_truth_is_what_the_events_say_by_brute_force(corpus):
    lines, truth = corpus
    assert truth_of(lines) == truth
    assert sum(n for n, _, _ in truth.values()) == 30_000
    # Amounts are quarters: every sum is exact whatever the order it is added in.
    assert truth_of(list(reversed(lines))) == truth


def test_events_are_json_objects_with_user_amount_and_time_in_produce_order(corpus):
    lines, _ = corpus
    events = [json.loads(line) for line in lines]
    assert all(set(e) == {"user", "amount", "ts"} for e in events)
    assert all(0 < e["amount"] < 10_000 and (e["amount"] * 4).is_integer() for e in events)
    times = [e["ts"] for e in events]
    assert times == sorted(times) and times[-1] - times[0] < 60_000


def test_users_follow_zipf(corpus):
    _, truth = corpus
    ranked = sorted((n for n, _, _ in truth.values()), reverse=True)
    harmonic = sum(1 / r for r in range(1, 2_001))
    assert ranked[0] / 30_000 == pytest.approx(1 / harmonic, rel=0.1)
    assert truth["u0000000"][0] == ranked[0]  # rank 0 is the most frequent user


def test_generation_is_deterministic_by_seed(corpus):
    lines, truth = corpus
    assert generate_events(30_000, 2_000, 1.0, 5, span_ms=60_000) == (lines, truth)
    assert generate_events(30_000, 2_000, 1.0, 6, span_ms=60_000)[0] != lines


def test_the_truth_survives_its_json_file(corpus):
    _, truth = corpus
    assert truth_from_json(json.loads(json.dumps(truth_to_json(truth)))) == truth


def test_the_checker_passes_only_exact_values_for_exactly_the_users():
    truth = {"a": (2, 3.5, 2.25), "b": (1, 0.25, 0.25)}
    assert "all 2 users" in check_aggregates("ours", {"a": (2, 3.5, 2.25), "b": (1, 0.25, 0.25)}, truth)
    for kept, said in (
        ({"a": (2, 3.5, 2.25), "b": (2, 0.25, 0.25)}, "1 users' (count, sum, max) differ (b: (2, 0.25, 0.25)"),
        ({"a": (2, 3.5000001, 2.25), "b": (1, 0.25, 0.25)}, "differ (a:"),
        ({"a": (2, 3.5, 2.5), "b": (1, 0.25, 0.25)}, "differ (a:"),
        ({"a": (2, 3.5, 2.25)}, "1 users missing (b)"),
        ({**truth, "c": (1, 1.0, 1.0)}, "1 users not in the input (c)"),
    ):
        with pytest.raises(AssertionError, match=r"^ours: of 2 users") as raised:
            check_aggregates("ours", kept, truth)
        assert said in str(raised.value)


def test_the_measures_are_count_sum_and_max_in_the_truth_s_order():
    spec = AggregateSpec.parse(MEASURES)
    assert [(m.name, m.aggregation.name, m.field) for m in spec.measures] == [
        ("n", "count", None),
        ("total", "sum", "amount"),
        ("hi", "max", "amount"),
    ]


def test_aggregate_runs_ours_beside_spark_s_and_stays_out_of_the_other_runs(capsys):
    args = parse_args(["--aggregate"])
    assert args.systems == ["partitioned-aggregate", "rocksdb-aggregate"]
    assert (args.phases, args.rounds, args.words, args.vocab) == (["throughput", "profile"], 3, 2_400_000, 300_000)
    assert args.out.name == "aggregate_compare"
    assert "partitioned-aggregate" not in parse_args([]).systems
    assert not {"partitioned-aggregate", "rocksdb-aggregate"} & set(TIMED_SYSTEMS)
    for bad in (["--systems", "partitioned,rocksdb-aggregate", "--aggregate"], ["--systems", "rocksdb-aggregate"]):
        with pytest.raises(SystemExit):
            parse_args(bad)
        assert "JSON events" in capsys.readouterr().err
