"""The slice plan (numpy) against the apply's rule (`advance`, one key at a time): the same
writes, skips, records, words and latest time for any stored states and deltas."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statestore.core.codecs import LONG_MAX, decode_long, encode_long
from statestore.core.errors import CodecError
from statestore.core.model import Entry
from statestore.stream.apply import advance
from statestore.stream.plan import Delta, entry_of, plan_slice, plan_writes, record_of

BATCH = 7
batches = st.one_of(st.none(), st.integers(0, 12))
times = st.one_of(st.none(), st.integers(0, 2**41))


@st.composite
def slices(draw):
    """Distinct keys, each with a stored entry (or none) and a delta."""
    size = draw(st.integers(0, 40))
    stored, deltas = [], []
    for i in range(size):
        key = f"k{i}".encode()
        if draw(st.booleans()):
            stored.append(Entry(key, encode_long(draw(st.integers(0, 2**40))), draw(batches), draw(times)))
        else:
            stored.append(None)
        deltas.append(Delta(key, draw(st.integers(1, 10_000)), draw(times)))
    return stored, deltas


@settings(max_examples=300, deadline=None)
@given(slices())
def test_the_slice_plan_is_advance_on_every_key(case):
    stored, deltas = case
    plan = plan_slice([None if e is None else record_of(e) for e in stored], deltas, BATCH)

    expected_writes = []
    for entry, delta in zip(stored, deltas, strict=True):
        new = advance(entry, delta, BATCH)
        if new is not None:
            expected_writes.append(Entry(delta.key, new[0], BATCH, new[1]))
    assert plan.writes == expected_writes
    assert plan.skipped == len(deltas) - len(expected_writes)
    assert plan.words == sum(d.amount for d in deltas)
    delta_times = [d.time_ms for d in deltas if d.time_ms is not None]
    assert plan.max_time_ms == (max(delta_times) if delta_times else None)

    # Every key's record as the store now holds it: the write, or the stored entry it skipped.
    written = {w.key: w for w in expected_writes}
    assert [key for key, _ in plan.records] == [d.key for d in deltas]
    for (key, record), entry in zip(plan.records, stored, strict=True):
        assert entry_of(key, record) == written.get(key, entry)


def test_a_replayed_slice_writes_nothing_and_keeps_the_records():
    first = plan_slice([None, None], [Delta(b"a", 2, 10), Delta(b"b", 3, None)], BATCH)
    again = plan_slice([record for _, record in first.records], [Delta(b"a", 2, 10), Delta(b"b", 3, None)], BATCH)
    assert (again.writes, again.skipped) == ([], 2)
    assert again.records == first.records
    assert [decode_long(entry_of(k, r).value) for k, r in again.records] == [2, 3]


def test_a_stored_value_that_is_no_long_is_refused_as_decode_long_refuses_it():
    odd = record_of(Entry(b"a", b"\x01\x02", 3, None))
    with pytest.raises(CodecError, match="a long value is 8 bytes, got 2"):
        plan_slice([odd], [Delta(b"a", 1, None)], BATCH)


def test_a_count_past_a_long_is_refused_not_wrapped():
    full = record_of(Entry(b"a", encode_long(LONG_MAX - 1), 3, None))
    with pytest.raises(CodecError, match="does not fit a signed 64-bit long"):
        plan_slice([full], [Delta(b"a", 2, None)], BATCH)
    # ... unless the key is skipped: a replay of the batch that wrote it adds nothing.
    written = record_of(Entry(b"a", encode_long(LONG_MAX - 1), BATCH, None))
    assert plan_slice([written], [Delta(b"a", 2, None)], BATCH).skipped == 1


def test_stored_records_and_deltas_must_pair_up():
    with pytest.raises(ValueError, match="1 stored records for 2 deltas"):
        plan_slice([None], [Delta(b"a", 1, None), Delta(b"b", 1, None)], BATCH)


def test_stored_values_of_wrong_lengths_are_refused_even_when_their_lengths_add_up():
    # 0 + 16 bytes is two longs' worth: read as one buffer, the records would come out shifted.
    current = {b"a": Entry(b"a", b"", 3, None), b"b": Entry(b"b", b"\x01" * 16, 3, None)}
    with pytest.raises(CodecError, match="a long value is 8 bytes, got 0"):
        plan_writes(current, [Delta(b"a", 1, None), Delta(b"b", 1, None)], BATCH)


def test_a_tasks_rows_are_cut_into_bounded_slices_and_an_empty_task_still_has_one():
    """apply.sliced, through which every store kind's rows go: at most SLICE a slice, in order,
    and always a last slice (maybe empty), so a task with no rows still reports its stats."""
    from statestore.stream.apply import SLICE, sliced

    assert list(sliced(iter(()))) == [[]]
    parts = list(sliced(range(2 * SLICE + 1)))
    assert [len(p) for p in parts] == [SLICE, SLICE, 1] and [x for p in parts for x in p] == list(range(2 * SLICE + 1))
    assert [len(p) for p in sliced(range(SLICE))] == [SLICE, 0]
