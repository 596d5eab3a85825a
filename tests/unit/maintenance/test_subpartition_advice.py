"""The audit's sub-partition recommendation (pure)."""

from __future__ import annotations

from statestore.maintenance.shared import selection
from statestore.maintenance.shared.selection import Thresholds, recommended_subpartitions
from statestore.maintenance.shared.units import MIB


def test_recommended_subpartitions_bring_the_largest_partition_under_the_target():
    # 300 MiB in the largest of N=1 partitions, target 50 MiB: 6 needed, rounded up to 8.
    assert recommended_subpartitions(300 * MIB, 1, 50 * MIB) == 8
    # Already 4 sub-partitions of 120 MiB each: the store partition is 480 MiB, 10 needed -> 16.
    assert recommended_subpartitions(120 * MIB, 4, 50 * MIB) == 16
    # Never fewer than twice the sub-partitions a store has (a skewed hot partition still gets more).
    assert recommended_subpartitions(60 * MIB, 8, 50 * MIB) == 16


def test_a_partitioned_kv_store_past_half_the_warn_threshold_is_told_its_subpartitions():
    advice = selection.recommend("partitioned-kv", 4, 4, 1000 * MIB, 300 * MIB, Thresholds())
    relayout = [a for a in advice if "relayout" in a]
    assert len(relayout) == 1 and "--subpartitions 8" in relayout[0]
    # A larger warn threshold (--warn-size) moves the point where the advice starts.
    assert selection.recommend("partitioned-kv", 4, 4, 1000 * MIB, 300 * MIB, Thresholds(800 * MIB, 900 * MIB)) == []
    again = selection.recommend("partitioned-kv", 4, 64, 1000 * MIB, 60 * MIB, Thresholds(), subpartitions=16)
    assert any("--subpartitions 32" in a for a in again) and "x 16 sub-partitions" in again[0]


def test_a_partitioned_versioned_store_is_told_its_subpartitions_too():
    advice = selection.recommend("partitioned-versioned", 4, 4, 1000 * MIB, 300 * MIB, Thresholds())
    relayout = [a for a in advice if "relayout" in a]
    assert len(relayout) == 1 and "--subpartitions 8" in relayout[0] and "every key's history" in relayout[0]
    assert any("global-versioned" in a for a in advice)  # the other ways out stay
    again = selection.recommend("partitioned-versioned", 4, 32, 1000 * MIB, 60 * MIB, Thresholds(), subpartitions=8)
    assert any("--subpartitions 16" in a for a in again)
    assert not any(
        "relayout" in a for a in selection.recommend("partitioned-versioned", 4, 4, 100, 40 * MIB, Thresholds())
    )


def test_no_subpartition_advice_for_types_without_them():
    for store_type in ("global-kv", "global-versioned"):
        advice = selection.recommend(store_type, 4, 4, 1000 * MIB, 300 * MIB, Thresholds())
        assert not any("relayout" in a for a in advice)
