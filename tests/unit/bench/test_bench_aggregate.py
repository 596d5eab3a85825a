"""The aggregate benchmark's JSON events and ground truths, per user and per user and minute
(bench/streaming_compare/compare/events.py), the check of what a system kept against them, its
command line (streaming_compare.py --aggregate) and its two pairs in the report."""

from __future__ import annotations

import json

import pytest
from compare.events import (
    MEASURES,
    check_aggregates,
    check_window_aggregates,
    generate_events,
    truth_from_json,
    truth_of,
    truth_to_json,
    window_truth_from_json,
    window_truth_of,
    window_truth_to_json,
)
from compare.report import aggregate, render
from compare.systems import COUNTERPARTS, WINDOW_MS
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
    assert args.systems == [
        "partitioned-aggregate",
        "rocksdb-aggregate",
        "partitioned-window-aggregate",
        "rocksdb-window-aggregate",
    ]
    assert (args.phases, args.rounds, args.words, args.vocab) == (["throughput", "profile"], 3, 2_400_000, 300_000)
    assert args.out.name == "aggregate_compare"
    assert "partitioned-aggregate" not in parse_args([]).systems
    assert not set(args.systems) & set(TIMED_SYSTEMS)
    assert "partitioned-window-aggregate" not in parse_args(["--timed"]).systems
    for bad in (
        ["--systems", "partitioned,rocksdb-aggregate", "--aggregate"],
        ["--systems", "rocksdb-aggregate"],
        ["--systems", "partitioned-window,partitioned-window-aggregate", "--aggregate"],
    ):
        with pytest.raises(SystemExit):
            parse_args(bad)
        assert "JSON events" in capsys.readouterr().err


# ------------------------------------------------------------------ per user and 1-minute window


def test_the_window_truth_is_each_user_s_events_per_minute_by_brute_force(corpus):
    lines, _ = corpus
    lines = lines + generate_events(3_000, 200, 1.0, 9, span_ms=600_000, start_ms=1_793_750_459_000)[0]
    expected: dict = {}
    for line in lines:
        event = json.loads(line)
        start = event["ts"] // 60_000 * 60_000  # tumbling minutes aligned to the epoch
        n, total, high = expected.get((event["user"], start), (0, 0.0, 0.0))
        expected[(event["user"], start)] = (n + 1, total + event["amount"], max(high, event["amount"]))
    truth = window_truth_of(lines, 60_000)
    assert truth == expected
    assert len({start for _, start in truth}) == 11  # the first minute, then ten from 00:00:59
    assert truth_of(list(reversed(lines))) == truth_of(lines)


def test_the_window_truth_adds_up_to_the_per_user_truth(corpus):
    lines, per_user = corpus
    by_window = window_truth_of(lines, WINDOW_MS)
    summed: dict = {}
    for (user, _), (n, total, high) in by_window.items():
        m, t, h = summed.get(user, (0, 0.0, 0.0))
        summed[user] = (m + n, t + total, max(h, high))
    assert summed == per_user
    assert window_truth_of(lines, 30_000) != by_window  # the window's size is the truth's


def test_the_window_truth_survives_its_json_file(corpus):
    truth = window_truth_of(corpus[0], WINDOW_MS)
    assert window_truth_from_json(json.loads(json.dumps(window_truth_to_json(truth)))) == truth


def test_the_window_checker_passes_only_exact_values_for_exactly_the_users_and_windows():
    truth = {("a", 0): (2, 3.5, 2.25), ("a", 60_000): (1, 0.25, 0.25), ("b", 0): (1, 1.0, 1.0)}
    assert "all 3 (user, window)" in check_window_aggregates("ours", dict(truth), truth)
    for kept, said in (
        ({**truth, ("a", 60_000): (1, 0.5, 0.25)}, "1 (user, window) pairs' (count, sum, max) differ (a at 60000:"),
        ({k: v for k, v in truth.items() if k != ("b", 0)}, "1 (user, window) pairs missing (b at 0)"),
        ({**truth, ("b", 60_000): (1, 1.0, 1.0)}, "1 (user, window) pairs not in the input (b at 60000)"),
        # The right values under the wrong window are both missing and extra.
        ({("a", 0): (2, 3.5, 2.25), ("a", 120_000): (1, 0.25, 0.25), ("b", 0): (1, 1.0, 1.0)}, "missing (a at 60000)"),
    ):
        with pytest.raises(AssertionError, match=r"^ours: of 3 \(user, window\) pairs") as raised:
            check_window_aggregates("ours", kept, truth)
        assert said in str(raised.value)


def test_both_pairs_are_side_by_side_in_the_summary_and_the_report():
    from tests.unit.bench.test_bench_report import worker_result

    assert COUNTERPARTS["partitioned-window-aggregate"] == "rocksdb-window-aggregate"
    systems = parse_args(["--aggregate"]).systems
    rates = dict(zip(systems, (30_000, 60_000, 20_000, 80_000), strict=True))
    summary = aggregate([worker_result(s, 1, rate, [1.0, 1.0]) for s, rate in rates.items()], systems)
    ours = summary["systems"]
    assert ours["partitioned-aggregate"]["x_counterpart"] == pytest.approx(0.5)
    assert ours["partitioned-window-aggregate"]["x_counterpart"] == pytest.approx(0.25)
    assert ours["partitioned-window-aggregate"]["counterpart"] == "rocksdb-window-aggregate"
    text = render({}, {}, {"max_offsets_per_trigger": 1, "command": "x"}, summary, [])
    assert "| Spark, RocksDB provider, withWatermark(ts, 1 min).groupBy(window(ts, 1 min), user)" in text
    assert text.index("count, sum, max per user)") < text.index("per user and 1 min window")


def test_every_system_s_stores_have_valid_names():
    # tp_partitioned_window_aggregate_1 is 33 characters: the store was refused before the run.
    from compare.systems import SYSTEMS
    from compare.worker import store_slug

    from statestore.core.names import validate_store_name

    for system in SYSTEMS:
        for name in (f"tp_{store_slug(system)}_3", f"pf_{store_slug(system)}", f"lat_{store_slug(system)}"):
            validate_store_name(name)
    assert len({store_slug(system) for system in SYSTEMS}) == len(SYSTEMS)
