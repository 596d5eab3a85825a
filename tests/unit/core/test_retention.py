"""The retention rule (statestore.core.retention): what is absent, its edges, its text forms."""

from __future__ import annotations

import numpy as np
import pytest

from statestore.core.errors import OptionError
from statestore.core.model import Entry, StoreSpec
from statestore.core.retention import (
    check_retention,
    cutoff_ms,
    expired,
    expired_among,
    format_retention,
    parse_retention,
    unexpired,
)
from statestore.core.windows import WindowSpec

DAY = 86_400_000


def test_the_cutoff_is_stream_time_minus_retention_and_needs_both():
    assert cutoff_ms(DAY, 10 * DAY) == 9 * DAY
    assert cutoff_ms(None, 10 * DAY) is None  # no retention: nothing hidden
    assert cutoff_ms(DAY, None) is None  # no stream time yet: nothing hidden


def test_an_entry_dated_before_the_cutoff_is_expired_and_one_at_it_is_not():
    assert expired(99, 100)
    assert not expired(100, 100)
    assert not expired(101, 100)


def test_an_entry_without_a_time_or_a_store_without_a_cutoff_never_expires():
    assert not expired(None, 100)
    assert not expired(0, None)


def test_the_array_form_agrees_with_the_rule():
    times = np.array([5, 99, 100, 101, 0], dtype=np.int64)
    has_time = np.array([True, True, True, True, False])
    for cutoff in (None, 100, 6):
        expected = [expired(int(t) if h else None, cutoff) for t, h in zip(times, has_time, strict=True)]
        assert expired_among(has_time, times, cutoff).tolist() == expected


def test_unexpired_leaves_out_exactly_the_expired_entries_in_order():
    entries = [Entry(b"a", b"1", 1, 50), Entry(b"b", b"2", 1, None), Entry(b"c", b"3", 1, 150)]
    assert [e.key for e in unexpired(entries, 100)] == [b"b", b"c"]
    assert [e.key for e in unexpired(entries, None)] == [b"a", b"b", b"c"]


@pytest.mark.parametrize(("text", "millis"), [("7d", 7 * DAY), ("12h", 12 * 3_600_000), ("none", None), ("None", None)])
def test_retentions_read_the_setting_form_and_none(text, millis):
    assert parse_retention(text) == millis
    assert parse_retention(format_retention(millis)) == millis


@pytest.mark.parametrize("text", ["0s", "7 days", "-1d", "soon"])
def test_a_retention_that_is_no_positive_duration_is_refused(text):
    with pytest.raises(ValueError, match="retention"):
        parse_retention(text)


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "7d"])
def test_a_retention_in_milliseconds_is_a_positive_int(bad):
    with pytest.raises(ValueError):
        check_retention(bad)


def test_a_spec_carries_a_retention_outside_its_layout_and_refuses_it_for_window_stores():
    plain = StoreSpec("ks", "s", "partitioned-kv", 2)
    kept = StoreSpec("ks", "s", "partitioned-kv", 2, retention_ms=DAY)
    assert kept.layout == plain.layout and kept != plain
    with pytest.raises(OptionError, match="own retention"):
        StoreSpec("ks", "w", "partitioned-window", 2, windowing=WindowSpec(60_000), retention_ms=DAY)
    with pytest.raises(OptionError, match="positive"):
        StoreSpec("ks", "s", "global-kv", 1, retention_ms=0)
