"""The side-by-side benchmark's command line (bench/streaming_compare/streaming_compare.py):
presets and phases."""

from __future__ import annotations

import pytest
from streaming_compare import parse_args, phases_of, restart_sizes


def test_the_full_run_is_the_issue_s_corpus_and_state_sizes():
    args = parse_args([])
    assert (args.words, args.vocab, args.batches) == (5_000_000, 1_000_000, 10)
    assert args.sizes == [10_000, 100_000, 1_000_000, 10_000_000]
    assert args.cold_restart is True
    assert args.profile is True
    assert args.systems == [
        "partitioned",
        "partitioned-reads",
        "global",
        "rocksdb",
        "hdfs",
        "stateless",
        "write-ceiling",
    ]


def test_quick_is_smaller_and_explicit_flags_still_win():
    quick = parse_args(["--quick"])
    assert quick.words < 1_000_000 and len(quick.sizes) < 3 and quick.profile is False
    assert quick.out.parts[-2:] == ("reports", "bench-quick")  # not committed
    custom = parse_args(["--quick", "--words", "5000", "--sizes", "100,10", "--profile"])
    assert custom.words == 5000 and custom.sizes == [10, 100] and custom.profile is True
    assert custom.rate == quick.rate  # the same input rate in both presets


def test_unknown_systems_and_phases_are_refused(capsys):
    with pytest.raises(SystemExit):
        parse_args(["--systems", "partitioned,flink"])
    assert "flink" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["--phases", "throughput,warp"])


def test_phases_per_system_and_round():
    assert phases_of("partitioned", 1, profile=True) == ["throughput", "latency", "restart", "profile"]
    assert phases_of("rocksdb", 1, profile=True) == ["throughput", "latency", "restart"]
    assert phases_of("stateless", 1, profile=True) == ["throughput", "latency"]
    assert phases_of("global", 2, profile=True) == ["throughput"]  # later rounds: throughput only
    assert phases_of("partitioned", 1, profile=False, only=["restart", "profile"]) == ["restart"]


def test_only_the_large_state_systems_fill_ten_million_keys():
    sizes = [10_000, 1_000_000, 10_000_000]
    assert restart_sizes("partitioned", sizes) == sizes
    assert restart_sizes("rocksdb", sizes) == sizes
    assert restart_sizes("global", sizes) == [10_000, 1_000_000]
    assert restart_sizes("hdfs", sizes) == [10_000, 1_000_000]
    assert parse_args(["--no-cold-restart"]).cold_restart is False


def test_spark_settings_reach_every_system_and_bad_ones_are_refused(capsys):
    args = parse_args(["--spark-conf", "spark.python.daemon.module=pyspark.daemon", "--spark-conf", "spark.a=b=c"])
    assert dict(args.spark_conf) == {"spark.python.daemon.module": "pyspark.daemon", "spark.a": "b=c"}
    assert parse_args([]).spark_conf == []
    for bad in ("spark.no-value", "python.daemon=x"):
        with pytest.raises(SystemExit):
            parse_args(["--spark-conf", bad])
        assert "spark.KEY=VALUE" in capsys.readouterr().err


def test_timed_sets_each_of_ours_beside_its_spark_operator_and_each_batch_counted_alone():
    timed = parse_args(["--timed"])
    assert timed.systems == [
        "partitioned",
        "rocksdb",
        "batch-counts",
        "partitioned-window",
        "rocksdb-window",
        "batch-counts-window",
        "partitioned-hopping",
        "rocksdb-hopping",
        "batch-counts-hopping",
        "partitioned-session",
        "rocksdb-session",
        "batch-counts-session",
    ]
    assert (timed.event_span, timed.phases, timed.rounds, timed.words) == (3600.0, ["throughput"], 2, 2_000_000)
    assert timed.out.name == "timed_compare"
    custom = parse_args(["--timed", "--systems", "partitioned-session,rocksdb-session", "--event-span", "60"])
    assert (custom.systems, custom.event_span) == (["partitioned-session", "rocksdb-session"], 60.0)
    assert parse_args([]).event_span == 0.0  # the default run keeps the producer's clock


def test_a_run_warms_up_with_one_uncounted_run_of_ours_unless_told_not_to():
    assert parse_args([]).warmup is True
    assert parse_args(["--timed", "--no-warmup"]).warmup is False
