"""Audit of large partitions: per Cassandra partition of every store, entries and bytes.

The scan runs in Spark tasks over token ranges (statestore.maintenance.scan); each task
sizes its rows with the SSTable model of statestore.maintenance.sizing and returns a small
summary (counts, a size histogram, its largest partitions, its breaches), merged on the
driver. The result is cross-checked with Cassandra's own figures (statestore.table_stats,
nodetool), judged against the thresholds (statestore.maintenance.selection) and turned
into a recommendation when a store outgrows its layout.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from statestore import registry
from statestore.codecs import canonical_name
from statestore.config import CassandraConfig
from statestore.errors import NodetoolError
from statestore.maintenance import selection
from statestore.maintenance.crosscheck import CassandraFigures, figures_of
from statestore.maintenance.nodetool import Nodetool
from statestore.maintenance.scan import (
    TableShape,
    default_ranges,
    run_over_ranges,
    scan_range,
    shape_of,
    token_splits,
)
from statestore.maintenance.selection import Level, PartitionStat, Policy, Thresholds
from statestore.maintenance.sizing import partition_overhead, row_bytes
from statestore.stores import StoreSpec

_log = logging.getLogger("statestore.maintenance.audit")
# Breaching partitions kept per task and in the report (the counts are always complete).
MAX_LISTED_BREACHES = 100


@dataclass(frozen=True)
class AuditOptions:
    thresholds: Thresholds = field(default_factory=Thresholds)
    policy: Policy = Policy.FAIL
    token_ranges: int | None = None  # default: two per core
    top: int = 10
    page_size: int = 5000
    flush: bool = False


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


def audit_task(config: CassandraConfig, targets: list[tuple[StoreSpec, TableShape]], options: AuditOptions):
    """The Spark task: audit the (store index, token range) items it is given; yields
    (store index, AuditSummary) per item."""

    def run(items: Iterator[tuple[int, tuple[int, int]]]) -> Iterator[tuple[int, AuditSummary]]:
        from statestore.cassandra import session_for

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


@dataclass
class StoreAudit:
    store: str
    store_type: str
    table: str
    store_partitions: int
    partitions: int
    entries: int
    bytes: int
    largest: PartitionStat | None
    top: list[PartitionStat]
    breaches: list[dict]
    warn_count: int
    fail_count: int
    level: str
    histogram: dict[str, int]
    cassandra: CassandraFigures
    agreement: float | None
    recommendations: list[str]
    task_seconds: float
    histogram_png: str | None = None


def store_audit(spec: StoreSpec, summary: AuditSummary, options: AuditOptions, figures: CassandraFigures) -> StoreAudit:
    """The report of one store from its merged summary and Cassandra's figures."""
    largest = summary.top[0] if summary.top else None
    reference = figures.max_partition_bytes
    return StoreAudit(
        store=spec.name,
        store_type=spec.store_type.value,
        table=f"{spec.keyspace}.{spec.table}",
        store_partitions=spec.partitions,
        partitions=summary.partitions,
        entries=summary.entries,
        bytes=summary.bytes,
        largest=largest,
        top=summary.top,
        breaches=[
            {
                **vars(stat),
                "level": Level(level).name.lower(),
                "reason": options.thresholds.reason(stat.bytes, stat.entries),
            }
            for level, stat in summary.breaches
        ],
        warn_count=summary.warn_count,
        fail_count=summary.fail_count,
        level=summary.worst.name.lower(),
        histogram={selection.bucket_label(i): n for i, n in enumerate(summary.histogram) if n},
        cassandra=figures,
        agreement=None if not (largest and reference) else round(largest.bytes / reference, 3),
        recommendations=selection.recommend(
            spec.store_type.value,
            spec.partitions,
            summary.partitions,
            summary.bytes,
            largest.bytes if largest else 0,
            options.thresholds,
        ),
        task_seconds=round(summary.seconds, 2),
    )


@dataclass
class AuditReport:
    keyspace: str
    generated_at: str
    thresholds: Thresholds
    policy: str
    status: str
    nodetool: str | None
    seconds: float
    rows_per_s: float
    token_ranges: int
    stores: list[StoreAudit]

    def failure_message(self) -> str:
        breaches = [
            f"{s.store}: {b['partition']} ({b['reason']})"
            for s in self.stores
            for b in s.breaches
            if b["level"] == "fail"
        ]
        return f"{sum(s.fail_count for s in self.stores)} partition(s) over the fail threshold: " + "; ".join(
            breaches[:5]
        )


def audit(
    spark, session, config: CassandraConfig, options: AuditOptions, stores: list[str] | None, nodetool: Nodetool | None
) -> AuditReport:
    """Audit `stores` (default: every store of the keyspace) in one Spark job."""
    registry.ensure_table(session, config.keyspace)
    if stores:
        specs = [registry.lookup(session, config.keyspace, name) for name in stores]
    else:
        specs = [spec for spec, _ in registry.list_stores(session, config.keyspace)]
    targets = [(spec, shape_of(session, spec)) for spec in specs]
    if options.flush and nodetool is not None:
        flush(nodetool, specs)
    ranges = token_splits(options.token_ranges or default_ranges(spark))
    work = [(index, token_range) for index in range(len(targets)) for token_range in ranges]
    began = time.monotonic()
    summaries = [AuditSummary() for _ in targets]
    if work:
        for index, part in run_over_ranges(spark, work, audit_task(config, targets, options), "auditing partitions"):
            summaries[index] = summaries[index].merge(part, options.top)
    seconds = time.monotonic() - began
    audits = [
        store_audit(spec, summary, options, figures)
        for spec, summary, figures in zip(specs, summaries, figures_of(session, specs, nodetool), strict=True)
    ]
    worst = max((Level[a.level.upper()] for a in audits), default=Level.OK)
    entries = sum(a.entries for a in audits)
    return AuditReport(
        keyspace=config.keyspace,
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        thresholds=options.thresholds,
        policy=options.policy.value,
        status=selection.verdict(worst, options.policy),
        nodetool=nodetool.describe() if nodetool else None,
        seconds=round(seconds, 2),
        rows_per_s=round(entries / seconds, 1) if seconds > 0 else 0.0,
        token_ranges=len(ranges),
        stores=audits,
    )


def flush(nodetool: Nodetool, specs: list[StoreSpec]) -> None:
    """Flush the tables and refresh size estimates, so Cassandra's figures cover all data."""
    try:
        for keyspace in sorted({spec.keyspace for spec in specs}):
            nodetool.flush(keyspace, *(spec.table for spec in specs if spec.keyspace == keyspace))
        nodetool.run("refreshsizeestimates")
    except NodetoolError as exc:
        _log.warning("flush before the audit failed (Cassandra's figures may miss recent writes): %s", exc)
