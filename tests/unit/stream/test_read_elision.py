"""Windows and sessions after the stream time are not read (apply_windows.windows_to_read,
apply_sessions.session_reads): batch after batch over a store held in a dict, the counts equal
a count of all events at once, and the reads left out never held a row."""

from __future__ import annotations

from collections import Counter

from hypothesis import example, given
from hypothesis import strategies as st

from statestore.core.codecs import decode_long
from statestore.core.model import SessionEntry, WindowedEntry
from statestore.core.windows import WindowSpec
from statestore.stream.apply import Delta
from statestore.stream.apply_sessions import new_sessions, plan_session_change, session_reads
from statestore.stream.apply_windows import plan_window_writes, windows_to_read
from tests.unit.stream.test_session_plan import brute_force

KEYS = (b"a", b"b")
# Batches of (key index, event time) events, in the order a stream reads them.
BATCHES = st.lists(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 60)), max_size=6), min_size=1, max_size=5)


def _window_deltas(events, windowing: WindowSpec) -> list[tuple[int, Delta]]:
    grouped: dict[tuple[bytes, int], list[int]] = {}
    for key, t in events:
        for start in windowing.starts_of(t):
            grouped.setdefault((KEYS[key], start), []).append(t)
    return [(start, Delta(key, len(ts), max(ts))) for (key, start), ts in grouped.items()]


@given(BATCHES, st.sampled_from([WindowSpec(10), WindowSpec(10, 5), WindowSpec(7, 3)]))
@example([[(0, 10)], [(0, 10)]], WindowSpec(10))  # a window starting exactly at the stream time
def test_windows_after_the_stream_time_are_new_and_counts_stay_exact(batches, windowing):
    store: dict[tuple[bytes, int], WindowedEntry] = {}
    stream_time = None
    for batch_id, events in enumerate(batches):
        deltas = _window_deltas(events, windowing)
        wanted = windows_to_read(deltas, stream_time)
        unread = {(d.key, start) for start, d in deltas} - set(wanted)
        assert not unread & store.keys(), "a window the store holds was not read"
        current = {w: store[w] for w in wanted if w in store}
        writes, _ = plan_window_writes(current, deltas, batch_id)
        store.update({(w.key, w.start_ms): w for w in writes})
        times = [t for _, t in events]
        stream_time = max([t for t in (stream_time, *times) if t is not None], default=None)
    expected = Counter((KEYS[k], s) for events in batches for k, t in events for s in windowing.starts_of(t))
    assert {w: decode_long(e.value) for w, e in store.items()} == dict(expected)


def test_every_window_is_read_without_a_stream_time_and_up_to_it_with_one():
    deltas = [(0, Delta(b"a", 1, 5)), (10, Delta(b"a", 1, 12)), (20, Delta(b"b", 1, 21))]
    assert windows_to_read(deltas, None) == [(b"a", 0), (b"a", 10), (b"b", 20)]
    assert windows_to_read(deltas, 10) == [(b"a", 0), (b"a", 10)]
    assert windows_to_read(deltas, 9) == [(b"a", 0)]


GAP = 10


@given(BATCHES)
@example([[(0, 10)], [(0, 20)]])  # the first time exactly the gap after the stream time: it joins
def test_keys_that_cannot_reach_the_stream_time_need_no_read_and_sessions_stay_exact(batches):
    store: dict[bytes, list[SessionEntry]] = {}
    stream_time = None
    for batch_id, events in enumerate(batches):
        times: dict[bytes, list[int]] = {}
        for key, t in events:
            times.setdefault(KEYS[key], []).append(t)
        deltas = [(Delta(key, len(ts), max(ts)), tuple(sorted(ts))) for key, ts in times.items()]
        read = {key for key, _, _ in session_reads(deltas, GAP, stream_time)}
        for delta, ts in deltas:
            current = store.get(delta.key, []) if delta.key in read else []
            if delta.key not in read:
                touching = [e for e in store.get(delta.key, []) if e.end_ms >= ts[0] - GAP]
                assert not touching, "a key with a session it joins was not read"
            change = plan_session_change(delta.key, current, ts, GAP, batch_id)
            gone = {(e.start_ms, e.end_ms) for e in change.deletes}
            kept = [e for e in store.get(delta.key, []) if (e.start_ms, e.end_ms) not in gone]
            store[delta.key] = kept + list(change.writes)
        stream_time = max([t for t in (stream_time, *(t for _, t in events)) if t is not None], default=None)
    for index, key in enumerate(KEYS):
        every = [t for events in batches for k, t in events if k == index]
        stored = {(e.start_ms, e.end_ms): decode_long(e.value) for e in store.get(key, [])}
        assert stored == brute_force(every, GAP)


def test_a_key_is_read_when_its_first_time_is_within_the_gap_of_the_stream_time():
    deltas = [(Delta(b"a", 1, 25), (25,)), (Delta(b"b", 1, 26), (26, 40)), (Delta(b"c", 1, 5), (5,))]
    assert [key for key, _, _ in session_reads(deltas, 10, None)] == [b"a", b"b", b"c"]
    assert session_reads(deltas, 10, 15) == [(b"a", 15, 35), (b"c", -5, 15)]


@given(st.lists(st.integers(0, 200), min_size=1, max_size=30), st.integers(1, 40))
def test_a_key_without_stored_sessions_is_planned_as_the_general_plan_would(times, gap):
    times = tuple(sorted(times))
    assert new_sessions(b"k", times, gap, 7) == plan_session_change(b"k", [], times, gap, 7)
