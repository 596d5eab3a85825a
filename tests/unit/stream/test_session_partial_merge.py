"""A merge across Cassandra partitions that an attempt left half written (issue 45 item 3):
write_plan writes the merged session before it deletes what it replaces, and a new attempt's
plan over whatever part of that landed (plan_session_change) completes it: every event counted
once, whatever lands of the earlier attempt's plan later."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from statestore.core.codecs import decode_long, encode_long
from statestore.core.model import SessionEntry
from statestore.store.tables.partitioned_session import SessionChange, write_plan
from statestore.stream.apply_sessions import plan_session_change
from tests.unit.stream.test_session_plan import brute_force, touched

GAP = 10
KEY = b"k"


def stored(times: list[int]) -> dict:
    """The sessions of `times`, as batch 1 wrote them."""
    return {
        (start, end): SessionEntry(KEY, start, end, encode_long(count), 1, end)
        for (start, end), count in brute_force(times, GAP).items()
    }


def applied(rows: dict, deletes, writes) -> dict:
    rows = dict(rows)
    for e in deletes:
        rows.pop((e.start_ms, e.end_ms), None)
    for e in writes:
        rows[(e.start_ms, e.end_ms)] = e
    return rows


def counts(rows: dict) -> dict:
    return {key: decode_long(e.value) for key, e in rows.items()}


@given(
    before=st.lists(st.integers(0, 200), max_size=8),
    times=st.lists(st.integers(0, 200), min_size=1, max_size=6),
    landed=st.lists(st.booleans(), min_size=12, max_size=12),
    deleted=st.lists(st.booleans(), min_size=12, max_size=12),
)
def test_a_new_attempt_completes_any_part_of_a_merge_its_predecessor_landed(before, times, landed, deleted):
    rows = stored(before)
    first = plan_session_change(KEY, touched(rows, times, GAP), times, GAP, 2)
    # What landed of the first attempt: any of its sessions, and of what each replaces, any
    # part once that session landed (write_plan: the deletes go after the writes).
    writes = [e for e, lands in zip(first.writes, landed, strict=False) if lands]
    covers = [(e.start_ms, e.end_ms) for e in writes]
    deletes = [
        e
        for e, goes in zip(first.deletes, deleted, strict=False)
        if goes and any(start <= e.start_ms and e.end_ms <= end for start, end in covers)
    ]
    partial = applied(rows, deletes, writes)

    second = plan_session_change(KEY, touched(partial, times, GAP), times, GAP, 2)
    done = partial if second is None else applied(partial, second.deletes, second.writes)
    assert counts(done) == brute_force(before + times, GAP)
    # The first attempt still running lands the rest of its plan: nothing changes.
    assert counts(applied(done, first.deletes, first.writes)) == brute_force(before + times, GAP)


def test_a_merge_across_partitions_writes_its_session_before_it_deletes_what_it_replaces():
    old = SessionEntry(KEY, 0, 50, encode_long(1), 1, 50)
    merged = SessionEntry(KEY, 0, 150, encode_long(2), 2, 150)
    grown = SessionEntry(KEY, 200, 210, encode_long(2), 2, 210)
    same_segment = SessionChange((SessionEntry(b"j", 200, 210, encode_long(1), 1, 210),), (grown,))

    plan = write_plan([SessionChange((old,), (merged,)), same_segment], [0, 0], lambda end: end // 100)

    assert plan.logged == ()
    assert plan.atomic == (((0, 1), SessionChange((), (merged,))), ((0, 2), same_segment))
    assert plan.after == (((0, 0), old),)
