"""nodetool on every node of a cluster: each node reports only what it holds, so the cluster's
figures combine every node's answer.

How each figure combines (pure functions below, unit tested):
  - partitions (tablestats' estimate): every node counts the partitions of every replica it
    holds, so the sum over the nodes divided by the replication factor estimates the table's
    distinct partitions (exact when every node answered and the data is balanced);
  - largest partition: the largest on any node; percentiles of partition size: the largest
    value of each percentile over the nodes (an upper bound: percentiles do not add up);
  - live space, SSTables, memtable cells: summed (the cluster's total, replicas included);
  - droppable tombstone ratio: the highest of any node (compaction is decided by the worst).
Flushes and compactions run on every node. A node that fails is named and left out; the
figures then say how many nodes answered. All failing raises the first node's error.
"""

from __future__ import annotations

import logging

from statestore.core.errors import NodetoolError

_log = logging.getLogger("statestore.maintenance")
_SUMMED = ("space_used_live", "sstable_count", "memtable_cell_count")


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def combine_tablestats(per_node: list[dict], replication: int) -> dict:
    """Pure: one table's tablestats from every answering node, as one node's would read."""
    combined = dict(per_node[0]) if per_node else {}
    partitions = sum(_number(n.get("number_of_partitions_estimate")) for n in per_node)
    combined["number_of_partitions_estimate"] = round(partitions / max(1, min(replication, len(per_node) or 1)))
    combined["compacted_partition_maximum_bytes"] = max(
        (int(_number(n.get("compacted_partition_maximum_bytes"))) for n in per_node), default=0
    )
    for name in _SUMMED:
        combined[name] = int(sum(_number(n.get(name)) for n in per_node))
    ratios = [n.get("droppable_tombstone_ratio") for n in per_node if n.get("droppable_tombstone_ratio") is not None]
    combined["droppable_tombstone_ratio"] = max(map(_number, ratios)) if ratios else None
    return combined


def combine_percentiles(per_node: list[dict[str, int]]) -> dict[str, int]:
    """Pure: the largest value of each percentile label over the nodes."""
    combined: dict[str, int] = {}
    for node in per_node:
        for label, value in node.items():
            combined[label] = max(value, combined.get(label, value))
    return combined


class EveryNode:
    """The nodetool of every node, with the one-node interface the maintenance jobs use."""

    def __init__(self, tools: list[tuple[str, object]]) -> None:
        self.tools = tools  # (host:port, Nodetool)
        self.failed: list[str] = []

    @property
    def answered(self) -> int:
        return len(self.tools) - len(self.failed)

    def describe(self) -> str:
        return f"{len(self.tools)} nodes ({', '.join(name for name, _ in self.tools)}): {self.tools[0][1].describe()}"

    def _each(self, call) -> list:
        """`call(nodetool)` on every node; the answers of those that did not fail."""
        answers, errors = [], []
        self.failed = []
        for name, tool in self.tools:
            try:
                answers.append(call(tool))
            except NodetoolError as exc:
                _log.warning("nodetool on %s failed: %s", name, exc)
                self.failed.append(name)
                errors.append(exc)
        if not answers:
            raise errors[0]
        return answers

    def run(self, *args: str) -> str:
        return "\n".join(self._each(lambda tool: tool.run(*args)))

    def tablestats_of(self, tables: list[tuple[str, str]], replication: int = 1) -> dict[tuple[str, str], dict]:
        answers = self._each(lambda tool: tool.tablestats_of(tables))
        return {table: combine_tablestats([a[table] for a in answers], replication) for table in tables}

    def partition_size_percentiles(self, keyspace: str, table: str) -> dict[str, int]:
        return combine_percentiles(self._each(lambda tool: tool.partition_size_percentiles(keyspace, table)))

    def flush(self, keyspace: str, *tables: str) -> None:
        self._each(lambda tool: tool.flush(keyspace, *tables))

    def compact(self, keyspace: str, table: str) -> None:
        self._each(lambda tool: tool.compact(keyspace, table))

    def garbagecollect(self, keyspace: str, table: str) -> None:
        self._each(lambda tool: tool.garbagecollect(keyspace, table))
