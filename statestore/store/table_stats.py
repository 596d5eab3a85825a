"""What Cassandra itself says about a store's table: size estimates and partition sizes, from
every node of the cluster.

Both sources are node-local. `system.size_estimates` holds each node's estimate over its
*primary* token ranges only (Cassandra 4.0 on), which do not overlap between nodes: the sum over
every node is the table's estimate, counting each partition once whatever the replication.
`system_views.max_partition_size` is the largest partition a node holds: the cluster's is the
largest of them. Each query goes to one node (`host=`), so the figures do not depend on which
node coordinates; a node that does not answer is named, and the sum then covers only the
primary ranges of the nodes that did (an underestimate, said so by `nodes_answered`).

`system.size_estimates` is refreshed every few minutes from flushed SSTables only, so a table
whose data still sits in memtables reports nothing yet; callers treat None as "no estimate".
"""

from __future__ import annotations

from dataclasses import dataclass

_WHERE = " WHERE keyspace_name = %s AND table_name = %s"
_SIZES = "SELECT partitions_count, mean_partition_size FROM system.size_estimates" + _WHERE
_MAX = "SELECT mebibytes FROM system_views.max_partition_size" + _WHERE


@dataclass(frozen=True)
class SizeEstimate:
    partitions: int
    mean_partition_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.partitions * self.mean_partition_bytes


@dataclass(frozen=True)
class NodeFigures:
    """One node's own view: partitions and bytes over its primary ranges, its largest partition."""

    node: str
    partitions: int
    total_bytes: int
    max_partition_mib: int | None


@dataclass(frozen=True)
class ClusterFigures:
    """Every answering node's view combined, and how many nodes that was."""

    size: SizeEstimate | None
    max_partition_mib: int | None
    nodes_answered: int
    nodes_total: int
    nodes_failed: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return self.nodes_answered == self.nodes_total


def combine(answers: list[NodeFigures], nodes_total: int, failed: tuple[str, ...] = ()) -> ClusterFigures:
    """Pure: the cluster's figures from the nodes that answered (primary ranges add up)."""
    partitions = sum(a.partitions for a in answers)
    size = None
    if partitions > 0:
        size = SizeEstimate(partitions, sum(a.total_bytes for a in answers) // partitions)
    maxima = [a.max_partition_mib for a in answers if a.max_partition_mib is not None]
    return ClusterFigures(size, max(maxima) if maxima else None, len(answers), nodes_total, failed)


def node_figures(session, keyspace: str, table: str, host=None) -> NodeFigures:
    """One node's figures; `host` (a driver Host) pins the queries to it (None: any node)."""
    rows = list(session.execute(_SIZES, (keyspace, table), host=host))
    maximum = session.execute(_MAX, (keyspace, table), host=host).one()
    return NodeFigures(
        node=str(host.endpoint) if host is not None else "coordinator",
        partitions=sum(r.partitions_count for r in rows),
        total_bytes=sum(r.partitions_count * r.mean_partition_size for r in rows),
        max_partition_mib=None if maximum is None else int(maximum.mebibytes),
    )


def cluster_figures(session, keyspace: str, table: str) -> ClusterFigures:
    """Every node's figures combined; nodes down or failing are counted out and named."""
    hosts = list(session.cluster.metadata.all_hosts())
    answers, failed = [], []
    for host in sorted(hosts, key=lambda h: str(h.endpoint)):
        if not host.is_up:
            failed.append(str(host.endpoint))
            continue
        try:
            answers.append(node_figures(session, keyspace, table, host))
        except Exception:  # noqa: BLE001 - any node that cannot answer is reported as such
            failed.append(str(host.endpoint))
    return combine(answers, len(hosts), tuple(failed))


def size_estimate(session, keyspace: str, table: str) -> SizeEstimate | None:
    """The table's estimate over the whole cluster (see cluster_figures)."""
    return cluster_figures(session, keyspace, table).size


def rows_estimate(session, keyspace: str, table: str, sample: list, overhead: int) -> int:
    """Rows of a table whose rows hold a key, a value and `overhead` more bytes: Cassandra's
    size estimate (flushed data only; 0 before the first flush) over the mean size of a
    `sample` of its rows (objects with .key and .value bytes)."""
    estimate = size_estimate(session, keyspace, table)
    if estimate is None or not sample:
        return 0
    mean_row = sum(len(row.key) + len(row.value) + overhead for row in sample) / len(sample)
    return int(estimate.total_bytes / mean_row)


def max_partition_mib(session, keyspace: str, table: str) -> int | None:
    """The largest partition of the table on any node, in whole MiB (system_views)."""
    return cluster_figures(session, keyspace, table).max_partition_mib
