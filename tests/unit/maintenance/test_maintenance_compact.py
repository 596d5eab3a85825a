"""Which versions compaction drops, and when it asks Cassandra to compact (pure)."""

from __future__ import annotations

import pytest

from statestore.core.errors import ConfigError
from statestore.maintenance.compact.compaction import CompactOptions
from statestore.maintenance.compact.prune import PruneSummary
from statestore.maintenance.shared.selection import VersionRow, tombstone_action, versions_to_drop

OPEN = 2**63 - 1


def history(*bounds: int, tombstone_last: bool = False) -> list[VersionRow]:
    """Versions [b0, b1), [b1, b2), ..., [bn, OPEN)."""
    ends = [*bounds[1:], OPEN]
    return [VersionRow(start, end, tombstone_last and end == OPEN) for start, end in zip(bounds, ends, strict=True)]


def test_versions_that_ended_by_the_cutoff_go():
    assert versions_to_drop(history(10, 20, 30, 40), cutoff_ms=30) == ([20, 30], False)


def test_the_version_valid_at_the_cutoff_stays():
    # [20, 30) is valid at 25: a read as of the cutoff needs it.
    assert versions_to_drop(history(10, 20, 30), cutoff_ms=25) == ([20], False)


def test_the_latest_version_always_stays():
    assert versions_to_drop(history(10), cutoff_ms=1000) == ([], False)
    # Even a latest version that is closed (its successor was dropped by hand) stays.
    closed = [VersionRow(10, 20, False), VersionRow(20, 30, False)]
    assert versions_to_drop(closed, cutoff_ms=1000) == ([20], False)


def test_a_key_deleted_before_the_cutoff_goes_entirely():
    assert versions_to_drop(history(10, 20, 30, tombstone_last=True), cutoff_ms=30) == ([20, 30, OPEN], True)


def test_a_key_deleted_after_the_cutoff_keeps_its_deletion_and_what_preceded_it():
    assert versions_to_drop(history(10, 20, 30, tombstone_last=True), cutoff_ms=25) == ([20], False)


def test_an_old_deletion_inside_the_history_is_dropped_like_any_version():
    versions = [VersionRow(10, 20, True), VersionRow(20, OPEN, False)]
    assert versions_to_drop(versions, cutoff_ms=25) == ([20], False)


def test_no_versions_nothing_to_drop():
    assert versions_to_drop([], 10) == ([], False)


@pytest.mark.parametrize(("ratio", "act"), [(None, False), (0.1, False), (0.2, False), (0.21, True)])
def test_compaction_only_past_the_threshold(ratio, act):
    assert tombstone_action(ratio, 0.2) is act


def test_compact_options_are_checked():
    with pytest.raises(ConfigError, match="compaction"):
        CompactOptions(cassandra_compaction="major")
    with pytest.raises(ConfigError, match="ratio"):
        CompactOptions(tombstone_threshold=1.5)


def test_prune_summaries_add_up():
    merged = PruneSummary(2, 5, 1, 3, 1, 1.0, ["a"]).merge(PruneSummary(1, 2, 0, 1, 0, 0.5, []))
    assert (merged.keys, merged.versions, merged.tombstone_versions, merged.dropped_versions) == (3, 7, 1, 4)
    assert (merged.dropped_keys, merged.seconds, merged.dropped_key_sample) == (1, 1.5, ["a"])
