"""What the sub-partitioned layouts share (partitioned-kv and partitioned-versioned with N > 1):
a store partition spread over N Cassandra partitions, (partition, sub-partition), each key's
sub-partition a hash independent of its partition (statestore.core.partitioner)."""

from __future__ import annotations

from itertools import product

from statestore.core.partitioner import partition_for, subpartition_for

# The Cassandra partition key of every statement of a sub-partitioned table.
PARTITION_WHERE = "partition = ? AND subpartition = ?"

Location = tuple[int, int]  # (partition, sub-partition): one Cassandra partition


class SubpartitionedLayout:
    """Mixed into a partitioned table whose spec has sub-partitions: where a key lives and which
    Cassandra partitions the store has (the inherited splits, scans and counts take both)."""

    PARTITION_WHERE = PARTITION_WHERE

    def partition_key_of(self, key: bytes) -> Location:
        """The Cassandra partition `key` lives in: (partition, sub-partition)."""
        partitions = self.spec.partitions
        return partition_for(key, partitions), subpartition_for(key, partitions, self.spec.subpartitions)

    def partition_keys(self) -> list[Location]:
        """Every Cassandra partition of the store, in (partition, sub-partition) order."""
        return list(product(range(self.spec.partitions), range(self.spec.subpartitions)))
