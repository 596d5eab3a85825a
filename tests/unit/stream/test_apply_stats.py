"""A task's ApplyStats cross from the executor to the driver as a one-row Arrow batch
(stats_batch, built without pandas) and come back whole (stats_from_row), nulls included: a
task with no rows and a batch's dead-letter count have no max_time_ms."""

from __future__ import annotations

import pytest

from statestore.stream.apply import ApplyStats, stats_batch, stats_from_row


@pytest.mark.parametrize(
    "stats",
    [
        ApplyStats(),
        ApplyStats(uncountable=3),
        ApplyStats(
            keys=5, written=4, skipped=1, max_time_ms=1_795_000_000_000, read=2, words=9, cache_tokens=((3, "a1"),)
        ),
        ApplyStats(keys=1, max_time_ms=-(2**63), cache_tokens=((0, "x"), (7, "größe"))),
    ],
)
def test_the_stats_come_back_as_they_went(stats):
    batch = stats_batch(stats)
    assert batch.num_rows == 1
    assert stats_from_row(batch.to_pylist()[0]) == stats
