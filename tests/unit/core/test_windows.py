"""Window arithmetic against brute force: which windows hold a time, lateness, expiry, the
segments that may be dropped, and session merging."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from statestore.core.errors import OptionError
from statestore.core.windows import (
    DAY_MS,
    Session,
    WindowSpec,
    merge_into_sessions,
)


@st.composite
def windowings(draw):
    size = draw(st.integers(min_value=1, max_value=50))
    hop = draw(st.integers(min_value=1, max_value=size))
    grace = draw(st.integers(min_value=0, max_value=30))
    retention = draw(st.integers(min_value=size + grace, max_value=size + grace + 100))
    return WindowSpec(size, hop, grace, retention)


@given(windowings(), st.integers(min_value=-5, max_value=500))
def test_a_time_falls_in_exactly_the_aligned_windows_that_contain_it(spec, time):
    expected = [s for s in range(0, 600, spec.hop_ms) if s <= time < s + spec.size_ms]
    assert spec.starts_of(time) == expected


@given(windowings(), st.none() | st.integers(min_value=0, max_value=400))
def test_the_first_open_start_parts_every_closed_window_from_every_open_one(spec, now):
    """What the apply cache forgets (statestore.stream.apply_windows): every start below
    first_open_start is closed, and none from it on."""
    first = spec.first_open_start(now)
    assert all(spec.closed(s, now) for s in range(0, first))
    assert not any(spec.closed(s, now) for s in range(first, first + 600))


@given(st.integers(min_value=1, max_value=20), st.integers(min_value=1, max_value=20), st.integers(0, 10**6))
def test_hopping_windows_count_a_time_size_over_hop_times_when_the_hop_divides(hops, hop, time):
    spec = WindowSpec(hops * hop, hop)
    if time >= spec.size_ms:  # near the epoch, windows that would start before it do not exist
        assert len(spec.starts_of(time)) == hops


def test_tumbling_is_the_default_and_retention_defaults_to_a_day():
    spec = WindowSpec(60_000)
    assert spec.tumbling and spec.hop_ms == 60_000 and spec.retention_ms == DAY_MS
    assert spec.starts_of(125_000) == [120_000]
    assert WindowSpec(2 * DAY_MS, grace_ms=5).retention_ms == 2 * DAY_MS + 5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"size_ms": 0}, "more than 0"),
        ({"size_ms": 10, "hop_ms": 11}, "at most the window"),
        ({"size_ms": 10, "hop_ms": 0}, "more than 0"),
        ({"size_ms": 10, "grace_ms": -1}, "negative"),
        ({"size_ms": 60_000, "grace_ms": 60_000, "retention_ms": 90_000}, r"at least window \+ grace \(2m\)"),
    ],
)
def test_a_windowing_that_cannot_work_is_refused_with_why(kwargs, message):
    with pytest.raises(OptionError, match=message):
        WindowSpec(**kwargs)


@given(windowings(), st.integers(0, 400), st.integers(0, 600))
def test_late_means_ended_more_than_grace_before_stream_time(spec, start, stream_time):
    assert spec.late(start, stream_time) == (stream_time - (start + spec.size_ms) > spec.grace_ms)
    assert not spec.late(start, None) and not spec.expired(start, None)


@given(windowings(), st.integers(0, 400), st.integers(0, 600))
def test_a_window_expires_only_after_it_is_late(spec, start, stream_time):
    if spec.expired(start, stream_time):
        assert spec.late(start, stream_time) or spec.size_ms + spec.grace_ms == spec.retention_ms


@given(st.integers(1, 50), st.integers(1, 50), st.integers(0, 500))
def test_segments_below_the_bound_hold_only_expired_windows_and_the_bound_one_does_not(segment, retention, stream_time):
    spec = WindowSpec(1, retention_ms=retention, segment_ms=segment)
    bound = spec.live_segments_from(stream_time)
    for start in range(0, 600):
        expired = start <= stream_time - retention
        if spec.segment_of(start) < bound:
            assert expired
    # the bound is as high as it can be: its segment's first start is not expired, or is the last
    assert bound * segment > stream_time - retention - segment
    assert spec.live_segments_from(None) == 0


@given(st.integers(1, 50), st.integers(1, 50), st.integers(0, 500), st.sets(st.integers(0, 40)))
def test_expired_segments_are_exactly_those_whose_every_window_expired(segment, retention, stream_time, stored):
    spec = WindowSpec(1, retention_ms=retention, segment_ms=segment)
    doomed = spec.expired_segments(sorted(stored), stream_time)
    every_start_expired = {
        s for s in stored if all(spec.expired(start, stream_time) for start in range(s * segment, (s + 1) * segment))
    }
    assert set(doomed) == every_start_expired
    assert spec.expired_segments(sorted(stored), None) == []


def test_segments_default_to_half_the_retention_and_at_least_a_minute():
    assert WindowSpec(60_000).segment_ms == DAY_MS // 2
    assert WindowSpec(1000, retention_ms=10_000).segment_ms == 60_000
    assert WindowSpec(1000, segment_ms=5).layout == (1000, 1000, 5, False)


def _brute_sessions(times, gap):
    sessions = []
    for t in sorted(times):
        if sessions and t - sessions[-1][1] <= gap:
            sessions[-1][1] = t
        else:
            sessions.append([t, t])
    return [Session(a, b) for a, b in sessions]


@given(st.lists(st.integers(0, 300), max_size=12), st.lists(st.integers(0, 300), max_size=12), st.integers(1, 40))
def test_merging_events_in_two_steps_equals_sessionising_them_at_once(first, second, gap):
    existing, replaced = merge_into_sessions([], first, gap)
    assert existing == _brute_sessions(first, gap) and replaced == []
    now, replaced = merge_into_sessions(existing, second, gap)
    assert now == _brute_sessions(first + second, gap)
    # replaced: exactly the earlier sessions that are no longer there as they were
    assert sorted(replaced, key=lambda s: s.start_ms) == [s for s in existing if s not in now]


def test_an_event_bridging_two_sessions_merges_them():
    now, replaced = merge_into_sessions([Session(0, 10), Session(30, 40)], [20], 10)
    assert now == [Session(0, 40)] and replaced == [Session(0, 10), Session(30, 40)]
    with pytest.raises(OptionError, match="gap"):
        merge_into_sessions([], [1], 0)
