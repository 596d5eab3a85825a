"""Audit of large partitions: per Cassandra partition of every store, entries and bytes.

The scan runs in Spark tasks over token ranges (statestore.maintenance.shared.scan); each task
sizes its rows with the SSTable model of statestore.maintenance.audit.sizing and returns a small
summary (counts, a size histogram, its largest partitions, its breaches), merged on the
driver. The result is cross-checked with Cassandra's own figures (statestore.store.table_stats,
nodetool), judged against the thresholds (statestore.maintenance.shared.selection) and turned
into a recommendation when a store outgrows its layout.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from statestore.core.config import CassandraConfig
from statestore.core.errors import NodetoolError
from statestore.core.model import StoreSpec
from statestore.maintenance.audit.tasks import AuditSummary, audit_task
from statestore.maintenance.shared import selection
from statestore.maintenance.shared.crosscheck import CassandraFigures, figures_of
from statestore.maintenance.shared.nodetool import Nodetool
from statestore.maintenance.shared.scan import default_ranges, run_over_ranges, shape_of, token_splits
from statestore.maintenance.shared.selection import Level, PartitionStat, Policy, Thresholds
from statestore.maintenance.shared.stores import stores_to_run
from statestore.store.book import history, registry

_log = logging.getLogger("statestore.maintenance.audit.partitions")


@dataclass(frozen=True)
class AuditOptions:
    thresholds: Thresholds = field(default_factory=Thresholds)
    policy: Policy = Policy.FAIL
    token_ranges: int | None = None  # default: two per core
    top: int = 10
    page_size: int = 5000
    flush: bool = False


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
            spec.subpartitions,
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
    specs = stores_to_run(session, config.keyspace, stores)
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
    record(session, audits)
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


def record(session, audits: list[StoreAudit]) -> None:
    """Each store's result in the maintenance history (the Airflow store page shows the latest)."""
    run_at = history.now()
    for a in audits:
        keyspace = a.table.split(".", 1)[0]
        history.ensure_table(session, keyspace)
        summary = {
            "partitions": a.partitions,
            "entries": a.entries,
            "bytes": a.bytes,
            "largest_partition": a.largest.partition if a.largest else None,
            "largest_bytes": a.largest.bytes if a.largest else 0,
            "warn": a.warn_count,
            "fail": a.fail_count,
            "recommendations": a.recommendations,
        }
        history.record(session, keyspace, a.store, history.AUDIT, run_at, a.level, None, summary)


def flush(nodetool: Nodetool, specs: list[StoreSpec]) -> None:
    """Flush the tables and refresh size estimates, so Cassandra's figures cover all data."""
    try:
        for keyspace in sorted({spec.keyspace for spec in specs}):
            nodetool.flush(keyspace, *(spec.table for spec in specs if spec.keyspace == keyspace))
        nodetool.run("refreshsizeestimates")
    except NodetoolError as exc:
        _log.warning("flush before the audit failed (Cassandra's figures may miss recent writes): %s", exc)
