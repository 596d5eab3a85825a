"""Splits: a store's table cut into pieces that parallel readers (the Spark data source,
statestore.dataframe) read on their own, each with its own queries. Pure: no I/O.

A split names what it reads the way the table is laid out: token ranges of the ring for the
tables keyed by the key alone (global-kv, global-versioned), Cassandra partitions by the values
of their partition key for the others ((partition,) for partitioned-kv and -versioned,
(partition, segment) for window and session stores; a sub-partitioned layout names its
(partition, subpartition) pairs the same way). Every split also carries the key bounds of the
read (`key_range`) or the very keys asked for (`keys`), which its table turns into CQL where
the layout allows and into a check on the rows read where it does not. Each table module owns
its `splits(...)` and `read_split(...)`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from statestore.core.model import EVERYTHING, KeyRange


@dataclass(frozen=True)
class Split:
    """One reader's share of a table (see the module doc). Picklable: it travels to Spark's
    executors inside an input partition."""

    token_ranges: tuple[tuple[int, int], ...] = ()  # inclusive Murmur3 token ranges
    partitions: tuple[tuple[int, ...], ...] = ()  # Cassandra partition key values
    key_range: KeyRange = EVERYTHING
    keys: tuple[bytes, ...] | None = None  # only these keys (a point read), within key_range


def spread(items: Sequence, count: int) -> list[tuple]:
    """`items` cut into at most `count` contiguous groups of sizes differing by one at most
    (none empty; no groups for no items)."""
    if count < 1:
        raise ValueError(f"a table is read in at least 1 split, got {count}")
    groups = min(count, len(items))
    if groups == 0:
        return []
    size, extra = divmod(len(items), groups)
    out, start = [], 0
    for i in range(groups):
        end = start + size + (1 if i < extra else 0)
        out.append(tuple(items[start:end]))
        start = end
    return out


def partition_splits(
    partitions: Sequence[tuple[int, ...]],
    count: int,
    key_range: KeyRange = EVERYTHING,
    keys: Iterable[bytes] | None = None,
    home: Callable[[bytes], tuple[int, ...]] | None = None,
) -> list[Split]:
    """Splits of a partitioned table: its Cassandra `partitions` in at most `count` groups.
    With `keys` and their `home` (the one partition a key lives in), each split gets the keys
    of its own partitions; without `home` (a key in several partitions, as in the segmented
    tables) every split gets them all and its table checks each partition for them."""
    keys = None if keys is None else tuple(keys)
    splits = []
    for group in spread(partitions, count):
        mine = keys
        if keys is not None and home is not None:
            members = set(group)
            mine = tuple(k for k in keys if home(k) in members)
        splits.append(Split(partitions=group, key_range=key_range, keys=mine))
    return splits


def ring_splits(token_ranges: Sequence[tuple[int, int]], key_range: KeyRange = EVERYTHING, keys=None) -> list[Split]:
    """Splits of a table keyed by the key alone: one per token range, or with `keys` one split
    reading just those (a key range cannot narrow a ring ordered by hash)."""
    if keys is not None:
        return [Split(key_range=key_range, keys=tuple(keys))]
    return [Split(token_ranges=(bounds,), key_range=key_range) for bounds in token_ranges]


def wanted_keys(split: Split) -> list[bytes] | None:
    """The keys `split` asks for that lie in its key range (None: it asks for no keys, but a range)."""
    if split.keys is None:
        return None
    return sorted(k for k in set(split.keys) if split.key_range.contains(k))
