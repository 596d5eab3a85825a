"""The audit's Spark tasks: scan token ranges, size each partition, summarize.

Each task sizes its rows with the SSTable model of statestore.maintenance.audit.sizing and returns
one small AuditSummary per (store, token range): counts, a size histogram, its largest
partitions and its breaches; the driver (statestore.maintenance.audit.partitions) merges them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from statestore.conn.cassandra import session_for
from statestore.core.codecs import canonical_name
from statestore.core.config import CassandraConfig
from statestore.core.model import StoreSpec
from statestore.maintenance.audit.sizing import partition_overhead, row_bytes
from statestore.maintenance.shared import selection
from statestore.maintenance.shared.scan import TableShape, scan_range
from statestore.maintenance.shared.selection import Level, PartitionStat

# Breaching partitions kept per task and in the report (the counts are always complete).
MAX_LISTED_BREACHES = 100


@dataclass
class AuditSummary:
    """What the tasks found; `add` per partition, `merge` across tasks (pure)."""

    partitions: int = 0
    entries: int = 0
    bytes: int = 0
    histogram: list[int] = field(default_factory=lambda: [0] * selection.HISTOGRAM_BUCKETS)
    top: list[PartitionStat] = field(default_factory=list)
    breaches: list[tuple[int, PartitionStat]] = field(default_factory=list)
    warn_count: int = 0
    fail_count: int = 0
    seconds: float = 0.0

    def add(self, stat: PartitionStat, level: Level, top_n: int) -> None:
        self.partitions += 1
        self.entries += stat.entries
        self.bytes += stat.bytes
        self.histogram[selection.size_bucket(stat.bytes)] += 1
        if len(self.top) < top_n or stat.bytes > self.top[-1].bytes:
            self.top = selection.top_partitions([*self.top, stat], top_n)
        if level != Level.OK:
            self.warn_count += level == Level.WARN
            self.fail_count += level == Level.FAIL
            if len(self.breaches) < MAX_LISTED_BREACHES:
                self.breaches.append((int(level), stat))

    def merge(self, other: AuditSummary, top_n: int) -> AuditSummary:
        breaches = sorted([*self.breaches, *other.breaches], key=lambda b: (-b[0], -b[1].bytes, b[1].partition))
        return AuditSummary(
            self.partitions + other.partitions,
            self.entries + other.entries,
            self.bytes + other.bytes,
            [a + b for a, b in zip(self.histogram, other.histogram, strict=True)],
            selection.top_partitions([*self.top, *other.top], top_n),
            breaches[:MAX_LISTED_BREACHES],
            self.warn_count + other.warn_count,
            self.fail_count + other.fail_count,
            self.seconds + other.seconds,
        )

    @property
    def worst(self) -> Level:
        return Level.FAIL if self.fail_count else Level.WARN if self.warn_count else Level.OK


def partition_stats(rows: Iterable, shape: TableShape, name_of: Callable[[tuple], str]) -> Iterator[PartitionStat]:
    """Group rows of (token, key columns..., cells...) in token order into one stat per partition."""
    pk_types = [shape.type_of(c) for c in shape.partition_key]
    ck_types = [shape.type_of(c) for c in shape.clustering]
    cell_types = [shape.type_of(c) for c in shape.cells]
    n_pk, n_ck = len(pk_types), len(ck_types)
    current = None
    token = entries = size = 0
    for row in rows:
        key = tuple(row[1 : 1 + n_pk])
        if key != current or row[0] != token:
            if current is not None:
                yield PartitionStat(name_of(current), token, entries, size)
            current, token, entries = key, row[0], 0
            size = partition_overhead(list(zip(key, pk_types, strict=True)))
        clustering = list(zip(row[1 + n_pk : 1 + n_pk + n_ck], ck_types, strict=True))
        cells = list(zip(row[1 + n_pk + n_ck :], cell_types, strict=True))
        entries += 1
        size += row_bytes(clustering, cells)
    if current is not None:
        yield PartitionStat(name_of(current), token, entries, size)


def partition_namer(spec: StoreSpec, shape: TableShape) -> Callable[[tuple], str]:
    """How the report names a partition: 'partition 3' for partitioned stores, else the key."""
    if spec.store_type.partitioned:
        return lambda key: " ".join(f"{c} {v}" for c, v in zip(shape.partition_key, key, strict=True))
    text_keys = canonical_name(spec.key_codec) == "string"

    def name(key: tuple) -> str:
        raw = bytes(key[0])
        if text_keys:
            try:
                return raw.decode("utf-8")[:200]
            except UnicodeDecodeError:
                pass
        return "0x" + raw[:100].hex()

    return name


def audit_task(config: CassandraConfig, targets: list[tuple[StoreSpec, TableShape]], options):
    """The Spark task: audit the (store index, token range) items it is given; yields
    (store index, AuditSummary) per item."""

    def run(items: Iterator[tuple[int, tuple[int, int]]]) -> Iterator[tuple[int, AuditSummary]]:

        session = session_for(config)
        for index, token_range in items:
            spec, shape = targets[index]
            name_of = partition_namer(spec, shape)
            summary = AuditSummary()
            began = time.monotonic()
            rows = scan_range(session, shape, token_range, options.page_size)
            for stat in partition_stats(rows, shape, name_of):
                summary.add(stat, options.thresholds.level(stat.bytes, stat.entries), options.top)
            summary.seconds = time.monotonic() - began
            yield index, summary

    return run
