"""Sub-partitions: where a key lands (pure), and which specs may have them."""

from __future__ import annotations

from collections import Counter

import pytest

from statestore.core.errors import OptionError
from statestore.core.model import StoreSpec, StoreType
from statestore.core.partitioner import locations_for, murmur2, partition_for, subpartition_for

KEYS = [f"word{i}".encode() for i in range(20_000)]


@pytest.mark.parametrize(("partitions", "subpartitions"), [(4, 16), (4, 4), (6, 9), (1, 8), (3, 2)])
def test_keys_spread_over_every_subpartition_of_every_partition(partitions, subpartitions):
    cells = Counter(locations_for(KEYS, partitions, subpartitions))
    assert len(cells) == partitions * subpartitions  # no (partition, sub-partition) left empty
    mean = len(KEYS) / (partitions * subpartitions)
    assert max(cells.values()) < 1.25 * mean and min(cells.values()) > 0.75 * mean


def test_the_hash_mod_n_pitfall_is_avoided():
    """murmur2 mod 16 with 4 partitions (a common factor) would use only 4 of each partition's
    16 sub-partitions; the sub-partition divides the partition's share of the hash out first."""
    naive = {(partition_for(k, 4), (murmur2(k) & 0x7FFFFFFF) % 16) for k in KEYS[:2000]}
    assert len(naive) == 16  # the pitfall: 4 partitions x 4 used sub-partitions
    assert len(set(locations_for(KEYS[:2000], 4, 16))) == 64


def test_vectorised_locations_equal_the_one_key_functions():
    keys = [*KEYS[:500], b"x" * 100, "é".encode(), b"\x00"]
    expected = [(partition_for(k, 4), subpartition_for(k, 4, 16)) for k in keys]
    assert locations_for(keys, 4, 16) == expected
    assert locations_for(keys[:3], 4, 16) == expected[:3]  # the one-at-a-time path too
    assert [p for p, _ in locations_for(keys, 4, 16)] == [partition_for(k, 4) for k in keys]  # Kafka's partition kept


def test_subpartitions_are_part_of_the_layout_and_only_for_partitioned_types():
    one = StoreSpec("ks", "s", StoreType.PARTITIONED_KV, 4)
    sixteen = StoreSpec("ks", "s", StoreType.PARTITIONED_KV, 4, subpartitions=16)
    assert one.subpartitions == 1 and one.layout != sixteen.layout
    assert StoreSpec("ks", "s", StoreType.PARTITIONED_VERSIONED, 4, subpartitions=8).subpartitions == 8
    for store_type in (StoreType.GLOBAL_KV, StoreType.GLOBAL_VERSIONED):
        with pytest.raises(OptionError, match="sub-partitions are for partitioned-kv"):
            StoreSpec("ks", "s", store_type, 1, subpartitions=2)
    for bad in (0, -1, True, 2.0):
        with pytest.raises(OptionError, match="at least 1 sub-partition"):
            StoreSpec("ks", "s", StoreType.PARTITIONED_KV, 4, subpartitions=bad)
