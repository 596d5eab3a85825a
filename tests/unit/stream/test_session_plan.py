"""The session apply's pure plan, batch after batch, against sessionizing all events at once."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from statestore.core.codecs import decode_long
from statestore.core.model import SessionEntry
from statestore.stream.apply_sessions import plan_session_change

GAP = 10


def brute_force(times: list[int], gap: int) -> dict[tuple[int, int], int]:
    """Sessions of sorted times: a new one wherever two neighbours are more than `gap` apart."""
    sessions: dict[tuple[int, int], int] = {}
    start = end = None
    count = 0
    for t in sorted(times):
        if start is not None and t - end > gap:
            sessions[(start, end)] = count
            start = None
        if start is None:
            start, count = t, 0
        end, count = t, count + 1
    if start is not None:
        sessions[(start, end)] = count
    return sessions


def touched(rows: dict, times: list[int], gap: int) -> list[SessionEntry]:
    """What the apply reads: sessions ending at or after first - gap, starting at or before last + gap."""
    return [e for e in rows.values() if e.end_ms >= min(times) - gap and e.start_ms <= max(times) + gap]


def apply(rows: dict, change) -> None:
    for e in change.deletes:
        del rows[(e.start_ms, e.end_ms)]
    for e in change.writes:
        rows[(e.start_ms, e.end_ms)] = e


@given(st.lists(st.lists(st.integers(0, 300), min_size=1, max_size=12), min_size=1, max_size=8), st.data())
def test_batches_of_times_give_the_sessions_of_all_times_and_replays_change_nothing(batches, data):
    rows: dict[tuple[int, int], SessionEntry] = {}
    for batch_id, times in enumerate(batches, start=1):
        change = plan_session_change(b"k", touched(rows, times, GAP), times, GAP, batch_id)
        assert change is not None
        assert all(w.batch_id == batch_id for w in change.writes) and change.writes
        if data.draw(st.booleans()):  # a crash after the change landed: the replay skips the key
            apply(rows, change)
            assert plan_session_change(b"k", touched(rows, times, GAP), times, GAP, batch_id) is None
        else:
            apply(rows, change)
    everything = [t for times in batches for t in times]
    assert {k: decode_long(e.value) for k, e in rows.items()} == brute_force(everything, GAP)
    assert all(e.time_ms == e.end_ms for e in rows.values())  # the latest event of a session is its end


def test_a_time_between_two_sessions_merges_them_and_deletes_both():
    first = SessionEntry(b"k", 0, 5, (2).to_bytes(8, "big"), 1, 5)
    second = SessionEntry(b"k", 20, 30, (3).to_bytes(8, "big"), 1, 30)
    change = plan_session_change(b"k", [first, second], [12], GAP, 2)
    assert set(change.deletes) == {first, second}
    assert [(w.start_ms, w.end_ms, decode_long(w.value)) for w in change.writes] == [(0, 30, 6)]
