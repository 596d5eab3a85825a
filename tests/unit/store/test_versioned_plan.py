"""The pure planning of versioned writes: which rows a put, a delete or a batch writes."""

from __future__ import annotations

import pytest

from statestore.core.codecs import decode_long, encode_long
from statestore.store.tables.versioned_base import OPEN_END, RowWrite, Version, plan_latest, plan_put
from statestore.store.versioned import check_timestamp
from statestore.stream.apply import Delta, plan_versions

K = b"k"


def _rows(writes: list[RowWrite]) -> list[tuple]:
    return [(w.version.valid_from, w.version.valid_to, w.version.value) for w in writes]


def test_put_on_a_new_key_is_the_current_version():
    writes, new = plan_put(None, K, b"v", 10)
    assert _rows(writes) == [(10, OPEN_END, b"v")]
    assert writes[0].replaces is None and new.current


def test_put_inside_a_version_splits_it_and_rewrites_the_row_it_ends_at():
    current = Version(K, b"old", 10, OPEN_END, 3, 10)
    writes, new = plan_put(current, K, b"new", 20)
    # The old part moves to a new row ending at 20; the row at the open end gets the new value.
    assert _rows(writes) == [(10, 20, b"old"), (20, OPEN_END, b"new")]
    assert writes[0].version.batch_id == 3 and writes[0].replaces is None
    assert writes[1].replaces == current and new.valid_to == OPEN_END


def test_put_at_a_versions_start_replaces_its_value_only():
    found = Version(K, b"old", 10, 30)
    writes, new = plan_put(found, K, b"new", 10)
    assert _rows(writes) == [(10, 30, b"new")] and new.valid_to == 30


def test_put_before_every_version_ends_where_the_next_begins():
    writes, new = plan_put(Version(K, b"later", 40, OPEN_END), K, b"early", 5)
    assert _rows(writes) == [(5, 40, b"early")] and new.valid_to == 40


def test_a_tombstone_is_a_version_with_no_value():
    writes, new = plan_put(Version(K, b"v", 1, OPEN_END), K, None, 9)
    assert _rows(writes) == [(1, 9, b"v"), (9, OPEN_END, None)] and new.tombstone


def test_a_batch_after_the_current_version_starts_a_new_one():
    current = Version(K, b"a", 100, OPEN_END, 1, 100)
    assert _rows(plan_latest(current, K, b"b", 200, 2, 150)) == [(100, 200, b"a"), (200, OPEN_END, b"b")]


@pytest.mark.parametrize("version_ms", [None, 50, 100])
def test_a_batch_not_after_the_current_version_rewrites_it_in_place(version_ms):
    current = Version(K, b"a", 100, OPEN_END, 1, 100)
    writes = plan_latest(current, K, b"b", version_ms, 2, 150)
    assert _rows(writes) == [(100, OPEN_END, b"b")]
    assert writes[0].replaces == current and writes[0].version.batch_id == 2


def test_a_new_key_without_a_version_time_starts_at_its_event_time_or_zero():
    assert _rows(plan_latest(None, K, b"v", None, 1, 77)) == [(77, OPEN_END, b"v")]
    assert _rows(plan_latest(None, K, b"v", None, 1, None)) == [(0, OPEN_END, b"v")]


def test_batch_plan_adds_to_the_current_value_and_skips_keys_the_batch_already_wrote():
    current = {
        b"a": Version(b"a", encode_long(5), 100, OPEN_END, 3, 90),
        b"b": Version(b"b", encode_long(7), 100, OPEN_END, 4, 90),  # batch 4 was applied: a replay
        b"c": Version(b"c", None, 100, OPEN_END, 2, 90),  # deleted: counts from 0
    }
    deltas = [Delta(b"a", 2, 120), Delta(b"b", 1, 120), Delta(b"c", 1, None), Delta(b"d", 4, 110)]
    changes, skipped = plan_versions(current, deltas, 4, 130)
    assert skipped == 1
    final = {c[-1].version.key: c[-1].version for c in changes}
    assert {k: decode_long(v.value) for k, v in final.items()} == {b"a": 7, b"c": 1, b"d": 4}
    assert all(v.valid_from == 130 and v.batch_id == 4 and v.current for v in final.values())
    assert [_rows(c)[0][:2] for c in changes if len(c) == 2] == [(100, 130), (100, 130)]  # a and c split
    assert final[b"a"].time_ms == 120 and final[b"c"].time_ms is None  # a deleted key starts afresh


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True, None, OPEN_END])
def test_timestamps_are_whole_non_negative_milliseconds(bad):
    with pytest.raises(ValueError, match="timestamp"):
        check_timestamp(bad)
    assert check_timestamp(0) == 0
