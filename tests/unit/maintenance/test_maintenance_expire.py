"""What to expire: the cutoff on each time basis and the verdict per entry (pure)."""

from __future__ import annotations

import pytest

from statestore.core.errors import ConfigError
from statestore.maintenance.expire.entries import ExpirySummary
from statestore.maintenance.shared.scan import TableShape
from statestore.maintenance.shared.selection import Cutoff, TimeBasis, expiry_cutoff, is_expired

DAY = 86_400_000


def test_stream_cutoff_follows_the_streams_time_not_the_clock():
    cutoff = expiry_cutoff(TimeBasis.STREAM, 2 * DAY, stream_time_ms=10 * DAY, now_ms=100 * DAY)
    assert cutoff == Cutoff(TimeBasis.STREAM, 8 * DAY)


def test_processing_cutoff_follows_the_clock():
    cutoff = expiry_cutoff(TimeBasis.PROCESSING, 2 * DAY, stream_time_ms=10 * DAY, now_ms=100 * DAY)
    assert cutoff == Cutoff(TimeBasis.PROCESSING, 98 * DAY)


def test_stream_basis_needs_a_stream_time():
    with pytest.raises(ConfigError, match="no stream time"):
        expiry_cutoff(TimeBasis.STREAM, DAY, stream_time_ms=None, now_ms=DAY)


def test_retention_must_be_positive():
    with pytest.raises(ConfigError, match="positive"):
        expiry_cutoff(TimeBasis.PROCESSING, 0, None, DAY)


@pytest.mark.parametrize(
    ("time_ms", "writetime_us", "expired"),
    [
        (8 * DAY - 1, None, True),
        (8 * DAY, None, False),  # exactly at the cutoff is kept
        (9 * DAY, 0, False),  # an old write of a recent event: stream time decides
        (None, 0, None),  # no event time: undated, kept
    ],
)
def test_stream_verdicts(time_ms, writetime_us, expired):
    assert is_expired(Cutoff(TimeBasis.STREAM, 8 * DAY), time_ms, writetime_us) is expired


@pytest.mark.parametrize(
    ("time_ms", "writetime_us", "expired"),
    [
        (None, (8 * DAY - 1) * 1000, True),
        (0, 8 * DAY * 1000, False),  # a recent write of an old event: write time decides
        (0, None, None),
    ],
)
def test_processing_verdicts(time_ms, writetime_us, expired):
    assert is_expired(Cutoff(TimeBasis.PROCESSING, 8 * DAY), time_ms, writetime_us) is expired


def test_summaries_add_up_and_keep_a_bounded_sample():
    left = ExpirySummary(10, 4, 1, 1.5, [f"a{i}" for i in range(15)])
    right = ExpirySummary(5, 5, 0, 0.5, [f"b{i}" for i in range(15)])
    merged = left.merge(right)
    assert (merged.scanned, merged.expired, merged.undated, merged.seconds) == (15, 9, 1, 2.0)
    assert merged.sample == [f"a{i}" for i in range(15)] + [f"b{i}" for i in range(5)]


def test_timestamped_deletes_address_the_whole_primary_key():
    shape = TableShape("ks", "t", ("partition",), ("key",), ("value",), ())
    assert shape.delete_row() == "DELETE FROM ks.t USING TIMESTAMP ? WHERE partition = ? AND key = ?"
    assert shape.token() == "token(partition)"
