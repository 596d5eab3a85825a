"""What Cassandra itself says about a store's table, for reports to set beside their own scans.

Over CQL: `system.size_estimates` (partitions and mean size, refreshed every few minutes)
and `system_views.max_partition_size` (whole MiB, rounded up). Over JMX with nodetool, when reachable:
`tablestats` (largest partition in bytes, live space, SSTables, droppable tombstones) and
`tablehistograms` (partition size percentiles). All of these cover flushed SSTables only, and
count a partition once per SSTable it is spread over; the largest partition is the upper
bound of a histogram bucket (buckets grow by 20%). On a cluster every figure gathers every
node's view (statestore.store.table_stats over CQL, statestore.maintenance.shared.node_figures over
JMX) and records how many nodes answered.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from statestore.core.errors import NodetoolError
from statestore.maintenance.shared.units import MIB
from statestore.store.table_stats import cluster_figures

_log = logging.getLogger("statestore.maintenance")


@dataclass
class CassandraFigures:
    estimated_partitions: int | None = None
    estimated_mean_partition_bytes: int | None = None
    max_partition_mib: int | None = None
    nodetool_max_partition_bytes: int | None = None
    nodetool_partition_percentiles: dict[str, int] = field(default_factory=dict)
    nodetool_partitions: int | None = None
    space_used_live_bytes: int | None = None
    sstable_count: int | None = None
    droppable_tombstone_ratio: float | None = None
    memtable_cells: int | None = None
    nodetool_error: str | None = None
    nodes_answered: int | None = None  # CQL figures: nodes whose view is in them, of nodes_total
    nodes_total: int | None = None
    nodetool_nodes: str | None = None  # e.g. "3 of 3", or "2 of 3 (failed: 127.0.0.1:7301)"

    @property
    def max_partition_bytes(self) -> int | None:
        """Cassandra's largest partition in bytes: nodetool's figure, else the MiB of system_views."""
        if self.nodetool_max_partition_bytes:
            return self.nodetool_max_partition_bytes
        if self.max_partition_mib:
            return self.max_partition_mib * MIB
        return None


def _number(value) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def figures_of(session, specs: list, nodetool, percentiles: bool = True, flush: bool = False) -> list[CassandraFigures]:
    """Cassandra's figures for several stores, with one nodetool call per kind (each starts a
    JVM); `flush` first writes the memtables out, so the figures cover every change."""
    figures = []
    for spec in specs:
        cluster = cluster_figures(session, spec.keyspace, spec.table)
        estimate = cluster.size
        figures.append(
            CassandraFigures(
                estimated_partitions=estimate.partitions if estimate else None,
                estimated_mean_partition_bytes=estimate.mean_partition_bytes if estimate else None,
                max_partition_mib=cluster.max_partition_mib,
                nodes_answered=cluster.nodes_answered,
                nodes_total=cluster.nodes_total,
            )
        )
    if nodetool is None:
        for f in figures:
            f.nodetool_error = "nodetool is off or not found (--nodetool)"
        return figures
    try:
        if flush:
            for keyspace in sorted({spec.keyspace for spec in specs}):
                nodetool.flush(keyspace, *(s.table for s in specs if s.keyspace == keyspace))
        stats = {}
        for keyspace in sorted({spec.keyspace for spec in specs}):  # one call (a JVM) per keyspace and RF
            tables = [(spec.keyspace, spec.table) for spec in specs if spec.keyspace == keyspace]
            stats.update(nodetool.tablestats_of(tables, replication_of(session, keyspace)))
        for spec, f in zip(specs, figures, strict=True):
            _from_tablestats(f, stats[(spec.keyspace, spec.table)])
            if percentiles:
                f.nodetool_partition_percentiles = nodetool.partition_size_percentiles(spec.keyspace, spec.table)
            f.nodetool_nodes = _nodes_of(nodetool)
    except NodetoolError as exc:
        _log.warning("nodetool figures unavailable: %s", exc)
        for f in figures:
            f.nodetool_error = str(exc)
    return figures


def replication_of(session, keyspace: str) -> int:
    """The keyspace's replication factor over all data centers (1 if unknown)."""
    meta = session.cluster.metadata.keyspaces.get(keyspace)
    strategy = getattr(meta, "replication_strategy", None)
    if strategy is None:
        return 1
    per_dc = getattr(strategy, "dc_replication_factors", None)
    if per_dc:
        return sum(int(v) for v in per_dc.values())
    return int(getattr(strategy, "replication_factor", 1) or 1)


def _nodes_of(nodetool) -> str:
    tools = getattr(nodetool, "tools", None)
    if tools is None:
        return "1 of 1"
    failed = f" (failed: {', '.join(nodetool.failed)})" if nodetool.failed else ""
    return f"{nodetool.answered} of {len(tools)}{failed}"


def _from_tablestats(figures: CassandraFigures, stats: dict) -> None:
    figures.nodetool_max_partition_bytes = int(stats.get("compacted_partition_maximum_bytes") or 0) or None
    figures.nodetool_partitions = int(stats.get("number_of_partitions_estimate") or 0)
    figures.space_used_live_bytes = int(_number(stats.get("space_used_live")) or 0)
    figures.sstable_count = int(stats.get("sstable_count") or 0)
    figures.droppable_tombstone_ratio = _number(stats.get("droppable_tombstone_ratio"))
    figures.memtable_cells = int(stats.get("memtable_cell_count") or 0)
