"""Splits of a table for parallel readers (statestore.store.tables.splits) and the choice of
each key's version at a time (statestore.store.tables.versioned_base.valid_at): pure parts."""

from __future__ import annotations

from itertools import pairwise

import pytest

from statestore.core.model import EVERYTHING, OPEN_END, KeyRange, Version
from statestore.store.tables.global_kv import token_splits
from statestore.store.tables.splits import Split, partition_splits, ring_splits, spread, wanted_keys
from statestore.store.tables.versioned_base import valid_at


@pytest.mark.parametrize("items, count", [(10, 3), (10, 10), (3, 8), (1, 1), (16, 4), (7, 2)])
def test_spread_keeps_order_and_balances(items, count):
    groups = spread(list(range(items)), count)
    assert [x for group in groups for x in group] == list(range(items))
    assert len(groups) == min(items, count)
    sizes = {len(g) for g in groups}
    assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1


def test_spread_of_nothing_and_a_bad_count():
    assert spread([], 4) == []
    with pytest.raises(ValueError, match="at least 1"):
        spread([1], 0)


def test_partition_splits_give_each_split_the_keys_of_its_partitions():
    home = {b"a": (0,), b"b": (1,), b"c": (2,), b"d": (0,)}
    splits = partition_splits([(0,), (1,), (2,)], 2, EVERYTHING, [b"a", b"b", b"c", b"d"], home.__getitem__)
    assert [s.partitions for s in splits] == [((0,), (1,)), ((2,),)]
    assert [s.keys for s in splits] == [(b"a", b"b", b"d"), (b"c",)]


def test_partition_splits_without_a_home_give_every_split_every_key():
    splits = partition_splits([(0, 5), (1, 5), (0, 6)], 3, KeyRange(b"a"), [b"x"])
    assert all(s.keys == (b"x",) and s.key_range == KeyRange(b"a") for s in splits)
    assert [s.partitions for s in splits] == [((0, 5),), ((1, 5),), ((0, 6),)]


def test_ring_splits_cover_the_ring_or_read_the_keys():
    splits = ring_splits(token_splits(8))
    assert len(splits) == 8 and splits[0].token_ranges[0][0] == -(2**63)
    assert splits[-1].token_ranges[0][1] == 2**63 - 1
    assert all(a.token_ranges[0][1] + 1 == b.token_ranges[0][0] for a, b in pairwise(splits))
    assert ring_splits(token_splits(8), keys=[b"k"]) == [Split(keys=(b"k",))]


def test_wanted_keys_are_the_keys_within_the_range_in_order():
    assert wanted_keys(Split()) is None
    split = Split(keys=(b"c", b"a", b"b", b"a"), key_range=KeyRange(b"a", b"b", False, True))
    assert wanted_keys(split) == [b"b"]


def _v(key: bytes, value, valid_from: int, valid_to: int = OPEN_END) -> Version:
    return Version(key, value, valid_from, valid_to)


def test_valid_at_picks_each_keys_version_containing_the_time():
    # What `valid_to > at` reads: each key's versions newest first, none ending at or before `at`.
    rows = [
        _v(b"a", b"3", 300),
        _v(b"a", b"2", 200, 300),  # valid at 250
        _v(b"b", b"1", 400),  # starts after 250: b had no value then
        _v(b"c", None, 240, 260),  # a tombstone: returned, the caller leaves it out
    ]
    assert list(valid_at(rows, 250)) == [_v(b"a", b"2", 200, 300), _v(b"c", None, 240, 260)]
    assert list(valid_at([_v(b"a", b"3", 300)], OPEN_END - 1)) == [_v(b"a", b"3", 300)]  # the current one
