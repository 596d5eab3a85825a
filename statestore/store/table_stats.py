"""What Cassandra itself says about a store's table: size estimates and partition sizes.

`system.size_estimates` is refreshed every few minutes from flushed SSTables only, so a table
whose data still sits in memtables reports nothing yet; callers treat None as "no estimate".
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SizeEstimate:
    partitions: int
    mean_partition_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.partitions * self.mean_partition_bytes


def size_estimate(session, keyspace: str, table: str) -> SizeEstimate | None:
    """This node's estimate over all its token ranges (a single node holds them all)."""
    rows = list(
        session.execute(
            "SELECT partitions_count, mean_partition_size FROM system.size_estimates"
            " WHERE keyspace_name = %s AND table_name = %s",
            (keyspace, table),
        )
    )
    partitions = sum(r.partitions_count for r in rows)
    if not rows or partitions == 0:
        return None
    total = sum(r.partitions_count * r.mean_partition_size for r in rows)
    return SizeEstimate(partitions, total // partitions)


def max_partition_mib(session, keyspace: str, table: str) -> int | None:
    """Cassandra's largest partition of the table on this node, in whole MiB (system_views)."""
    row = session.execute(
        "SELECT mebibytes FROM system_views.max_partition_size WHERE keyspace_name = %s AND table_name = %s",
        (keyspace, table),
    ).one()
    return None if row is None else int(row.mebibytes)
