"""The audit's pure parts: thresholds, verdicts, recommendations, partition grouping and sizing."""

from __future__ import annotations

import pytest

from statestore.core.durations import parse_duration_ms
from statestore.core.errors import ConfigError
from statestore.maintenance.audit.sizing import row_bytes, vint_size
from statestore.maintenance.audit.tasks import AuditSummary, partition_stats
from statestore.maintenance.shared import selection
from statestore.maintenance.shared.nodetool import parse_histograms
from statestore.maintenance.shared.scan import TableShape
from statestore.maintenance.shared.selection import Level, PartitionStat, Policy, Thresholds
from statestore.maintenance.shared.units import MIB, parse_size

T = Thresholds(warn_bytes=100, fail_bytes=400, warn_entries=10, fail_entries=50)


@pytest.mark.parametrize(
    ("size", "entries", "level"),
    [
        (100, 10, Level.OK),  # at a threshold is not over it
        (101, 1, Level.WARN),
        (1, 11, Level.WARN),
        (401, 1, Level.FAIL),
        (1, 51, Level.FAIL),
        (150, 60, Level.FAIL),
    ],
)
def test_partitions_breach_by_size_or_entry_count(size, entries, level):
    assert T.level(size, entries) == level


def test_default_thresholds_follow_cassandras_guidance():
    t = Thresholds()
    assert (t.warn_bytes, t.fail_bytes) == (100 * MIB, 400 * MIB)
    assert t.level(100 * MIB, 10**9) == Level.OK  # entry counts are off unless given
    assert t.level(100 * MIB + 1, 1) == Level.WARN
    assert t.level(400 * MIB + 1, 1) == Level.FAIL


def test_inconsistent_thresholds_are_refused():
    with pytest.raises(ConfigError, match="warn"):
        Thresholds(warn_bytes=500, fail_bytes=400)
    with pytest.raises(ConfigError, match="entry"):
        Thresholds(warn_entries=10, fail_entries=5)


def test_reason_names_the_thresholds_passed():
    assert T.reason(500, 20) == "500 B over the fail threshold of 400 B; 20 entries over the warn threshold of 10"


@pytest.mark.parametrize(
    ("worst", "policy", "status"),
    [
        (Level.OK, Policy.FAIL, "ok"),
        (Level.WARN, Policy.FAIL, "warn"),
        (Level.FAIL, Policy.FAIL, "fail"),
        (Level.FAIL, Policy.WARN, "warn"),
    ],
)
def test_verdict_fails_only_under_the_fail_policy(worst, policy, status):
    assert selection.verdict(worst, policy) == status


def test_recommendation_for_an_outgrown_partitioned_store():
    advice = selection.recommend("partitioned-kv", 4, 4, 1000 * MIB, 300 * MIB, Thresholds())
    assert "is over the warn threshold" in advice[0]
    assert "--subpartitions 8" in advice[1]  # 300 MiB / 50 MiB -> 6, a power of two up
    assert "global-kv" in advice[2] and "at least 20 partitions" in advice[2]  # 1000 MiB / 50 MiB
    assert len(advice) == 3  # 300 MiB is not twice the 250 MiB mean: not skewed
    skewed = selection.recommend("partitioned-kv", 4, 4, 1000 * MIB, 600 * MIB, Thresholds())
    assert "skewed" in skewed[3]


def test_no_recommendation_while_partitions_are_comfortable():
    assert selection.recommend("partitioned-kv", 4, 4, 100 * MIB, 50 * MIB, Thresholds()) == []


def test_recommendations_for_global_and_versioned_stores():
    assert "split large values" in selection.recommend("global-kv", 1, 10, 300 * MIB, 200 * MIB, Thresholds())[0]
    assert "compact_state" in selection.recommend("global-versioned", 1, 10, 300 * MIB, 200 * MIB, Thresholds())[0]
    advice = selection.recommend("partitioned-versioned", 2, 2, 400 * MIB, 200 * MIB, Thresholds())
    assert "statestore relayout" in advice[1] and "global-versioned" in advice[2]


def test_histogram_buckets_are_powers_of_two():
    assert [selection.size_bucket(n) for n in (0, 1, 2, 3, 4, 1023, 1024)] == [0, 0, 1, 1, 2, 9, 10]
    assert selection.size_bucket(2**80) == selection.HISTOGRAM_BUCKETS - 1
    assert selection.bucket_label(20) == "1.0 MiB"


SHAPE = TableShape(
    "ks",
    "t",
    ("partition",),
    ("key",),
    ("batch_id", "time", "value"),
    (("partition", "int"), ("key", "blob"), ("batch_id", "bigint"), ("time", "timestamp"), ("value", "blob")),
)


def test_rows_in_token_order_group_into_partitions():
    rows = [(-5, 0, b"a", 1, None, b"12345678"), (-5, 0, b"bb", 1, None, b"12345678"), (7, 1, b"c", 2, None, b"x")]
    stats = list(partition_stats(rows, SHAPE, lambda key: f"p{key[0]}"))
    assert [(s.partition, s.token, s.entries) for s in stats] == [("p0", -5, 2), ("p1", 7, 1)]
    # Each row: fixed part, clustering (header + length + key), the columns bitmap (time is
    # absent), then flags + value per present cell.
    first = row_bytes([(b"a", "blob")], [(1, "bigint"), (None, "timestamp"), (b"12345678", "blob")])
    assert first == 7 + (1 + 1 + 1) + 1 + (1 + 8) + (1 + 1 + 8)
    assert stats[0].bytes == 15 + 4 + first + first + 1  # header, int key, rows (second key 1 byte longer)


def test_vint_sizes_match_cassandras_encoding():
    assert [vint_size(v) for v in (0, 127, 128, 16383, 16384, 2**56 - 1, 2**56, 2**63)] == [1, 1, 2, 2, 3, 8, 9, 9]


def test_summaries_merge_counts_top_partitions_and_breaches():
    thresholds = Thresholds(warn_bytes=100, fail_bytes=1000)
    left, right = AuditSummary(), AuditSummary()
    for i, size in enumerate((50, 150, 5000)):
        stat = PartitionStat(f"a{i}", i, 1, size)
        left.add(stat, thresholds.level(stat.bytes, stat.entries), top_n=2)
    right.add(PartitionStat("b", 9, 3, 2000), Level.FAIL, top_n=2)
    merged = left.merge(right, top_n=2)
    assert (merged.partitions, merged.entries, merged.bytes) == (4, 6, 7200)
    assert [p.partition for p in merged.top] == ["a2", "b"]
    assert (merged.warn_count, merged.fail_count, merged.worst) == (1, 2, Level.FAIL)
    assert [(lvl, s.partition) for lvl, s in merged.breaches] == [(2, "a2"), (2, "b"), (1, "a1")]
    assert sum(merged.histogram) == 4


@pytest.mark.parametrize(
    ("raw", "size"),
    [("100MiB", 100 * MIB), ("400MB", 400_000_000), ("1.5GiB", 1536 * MIB), ("4096", 4096), ("2k", 2048)],
)
def test_sizes_parse(raw, size):
    assert parse_size(raw) == size


@pytest.mark.parametrize(("raw", "ms"), [("7d", 604_800_000), ("12h", 43_200_000), ("90", 90_000), ("500ms", 500)])
def test_durations_parse(raw, ms):
    assert parse_duration_ms(raw) == ms


@pytest.mark.parametrize("bad", ["ten", "5 parsecs", "-1d"])
def test_bad_durations_are_refused(bad):
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration_ms(bad)


def test_tablehistograms_output_parses():
    text = """ks/t histograms
Percentile      Read Latency     Write Latency          SSTables    Partition Size        Cell Count
                    (micros)          (micros)                             (bytes)
50%                  4768.00            642.00              2.00               770                42
Max                 88148.00           3973.00              7.00          12108970            654949
"""
    assert parse_histograms(text, "Partition Size") == {"50%": 770, "Max": 12108970}
    assert parse_histograms(text, "Cell Count") == {"50%": 42, "Max": 654949}
