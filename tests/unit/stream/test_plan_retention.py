"""The stream's read before write under a retention: an entry past the cutoff counts from zero,
whether it was read from the store or vouched for by the apply cache, and a replay still skips."""

from __future__ import annotations

from statestore.core.codecs import decode_long, encode_long
from statestore.core.model import Entry
from statestore.store.tables.versioned_base import Version
from statestore.stream.apply import plan_versions
from statestore.stream.plan import Delta, plan_slice, plan_writes, record_of

CUTOFF = 1_000


def _value(entry: Entry) -> int:
    return decode_long(entry.value)


def test_an_expired_entry_counts_from_zero_with_the_batches_time_only():
    stored = {b"old": Entry(b"old", encode_long(40), 3, CUTOFF - 1), b"new": Entry(b"new", encode_long(40), 3, CUTOFF)}
    deltas = [Delta(b"old", 2, CUTOFF + 5), Delta(b"new", 2, CUTOFF + 5)]
    writes, skipped = plan_writes(stored, deltas, 5, CUTOFF)
    assert skipped == 0
    assert {w.key: (_value(w), w.time_ms) for w in writes} == {b"old": (2, CUTOFF + 5), b"new": (42, CUTOFF + 5)}


def test_without_a_cutoff_nothing_expires():
    stored = {b"old": Entry(b"old", encode_long(40), 3, 1)}
    writes, _ = plan_writes(stored, [Delta(b"old", 2, 5)], 5, None)
    assert _value(writes[0]) == 42


def test_an_expired_late_record_keeps_no_old_time():
    # The key's only time is now the batch's own (older than the stored one): nothing of the
    # expired entry survives, not even its time.
    stored = {b"k": Entry(b"k", encode_long(9), 3, CUTOFF - 1)}
    writes, _ = plan_writes(stored, [Delta(b"k", 1, CUTOFF - 50)], 5, CUTOFF)
    assert (_value(writes[0]), writes[0].time_ms) == (1, CUTOFF - 50)


def test_an_entry_without_a_time_is_never_expired():
    stored = {b"k": Entry(b"k", encode_long(9), 3, None)}
    writes, _ = plan_writes(stored, [Delta(b"k", 1, CUTOFF + 1)], 5, CUTOFF)
    assert _value(writes[0]) == 10


def test_a_replay_skips_a_key_it_wrote_even_when_that_entry_is_past_the_cutoff():
    stored = {b"k": Entry(b"k", encode_long(1), 5, CUTOFF - 50)}
    writes, skipped = plan_writes(stored, [Delta(b"k", 1, CUTOFF - 50)], 5, CUTOFF)
    assert (writes, skipped) == ([], 1)


def test_a_cached_record_past_the_cutoff_is_not_brought_back():
    # The apply cache hands the plan records, not entries: the same rule holds for them.
    cached = record_of(Entry(b"k", encode_long(70), 2, CUTOFF - 1))
    plan = plan_slice([cached], [Delta(b"k", 3, CUTOFF + 1)], 5, CUTOFF)
    assert _value(plan.writes[0]) == 3
    assert plan.records[0][1] == record_of(plan.writes[0])  # the cache now keeps the new count


def test_a_versioned_key_whose_current_version_expired_counts_from_zero():
    current = {b"k": Version(b"k", encode_long(30), 10, time_ms=CUTOFF - 1, batch_id=2)}
    changes, skipped = plan_versions(current, [Delta(b"k", 4, CUTOFF + 9)], 5, CUTOFF + 9, CUTOFF)
    assert skipped == 0
    new = changes[0][-1].version
    assert (decode_long(new.value), new.valid_from) == (4, CUTOFF + 9)
