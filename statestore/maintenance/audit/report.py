"""The audit's report files: audit_partitions.json / .md / .html and a histogram PNG per store."""

from __future__ import annotations

import math
from pathlib import Path

from statestore.maintenance.audit.partitions import AuditReport, StoreAudit
from statestore.maintenance.shared import reports, selection
from statestore.maintenance.shared.units import human_bytes

NAME = "audit_partitions"


def _histogram(audit: StoreAudit, report: AuditReport, report_dir: Path) -> str | None:
    counts = dict.fromkeys(range(selection.HISTOGRAM_BUCKETS), 0)
    labels = {selection.bucket_label(i): i for i in counts}
    for label, n in audit.histogram.items():
        counts[labels[label]] = n
    used = [i for i, n in counts.items() if n]
    if not used:
        return None
    warn, fail = report.thresholds.warn_bytes, report.thresholds.fail_bytes
    edges = [*used, selection.size_bucket(warn), selection.size_bucket(fail)]
    low, high = min(edges), max(edges)
    buckets = list(range(low, high + 1))
    path = report_dir / f"{NAME}_{audit.store}.png"
    reports.histogram_png(
        path,
        f"{audit.store}: partition sizes ({audit.partitions} partitions, {human_bytes(audit.bytes)})",
        [selection.bucket_label(i) for i in buckets],
        [counts[i] for i in buckets],
        # Bars sit at whole positions, bucket i spanning [i - 0.5, i + 0.5) on a log2 scale.
        {"warn": math.log2(warn) - low - 0.5, "fail": math.log2(fail) - low - 0.5},
    )
    return path.name


def _store_section(audit: StoreAudit) -> str:
    c = audit.cassandra
    largest = audit.largest
    lines = [
        f"## Store `{audit.store}` ({audit.store_type}, table `{audit.table}`): {audit.level.upper()}",
        "",
        f"{audit.partitions} Cassandra partition(s), {audit.entries} entries, {human_bytes(audit.bytes)} "
        f"(scan tasks busy {audit.task_seconds:.1f} s). Partitions at warn level: {audit.warn_count}; "
        f"at fail level: {audit.fail_count}.",
        "",
    ]
    if audit.histogram_png:
        lines += [f"![partition sizes of {audit.store}]({audit.histogram_png})", ""]
    lines += [
        "### Largest partitions",
        "",
        reports.table(
            ["partition", "token", "entries", "bytes", "size"],
            [[p.partition, p.token, p.entries, p.bytes, human_bytes(p.bytes)] for p in audit.top],
        ),
        "",
    ]
    if audit.breaches:
        lines += [
            "### Breaches",
            "",
            reports.table(
                ["level", "partition", "entries", "size", "why"],
                [
                    [b["level"], b["partition"], b["entries"], human_bytes(b["bytes"]), b["reason"]]
                    for b in audit.breaches
                ],
            ),
            "",
        ]
    agreement = "-" if audit.agreement is None else f"{audit.agreement:.2f}"
    lines += [
        "### Cassandra's own figures",
        "",
        reports.table(
            ["figure", "value"],
            [
                ["largest partition, this scan", human_bytes(largest.bytes if largest else None)],
                ["largest partition, nodetool tablestats", human_bytes(c.nodetool_max_partition_bytes)],
                [
                    "largest partition, system_views.max_partition_size",
                    f"{c.max_partition_mib} MiB" if c.max_partition_mib is not None else "-",
                ],
                ["scan / Cassandra", agreement],
                ["partitions, system.size_estimates", c.estimated_partitions],
                ["mean partition, system.size_estimates", human_bytes(c.estimated_mean_partition_bytes)],
                [
                    "partition size percentiles, nodetool tablehistograms",
                    ", ".join(f"{k} {human_bytes(v)}" for k, v in c.nodetool_partition_percentiles.items()) or "-",
                ],
                ["live space", human_bytes(c.space_used_live_bytes)],
                ["SSTables", c.sstable_count],
                ["droppable tombstone ratio", c.droppable_tombstone_ratio],
                ["nodetool", c.nodetool_error or "ok"],
                ["nodes answering, CQL (system tables)", f"{c.nodes_answered} of {c.nodes_total}"],
                ["nodes answering, nodetool", c.nodetool_nodes or "-"],
            ],
        ),
        "",
        "Cassandra counts flushed SSTables only, and its largest partition is the upper bound of a "
        "histogram bucket (buckets 20% apart); the scan counts live rows with a model of the SSTable format.",
        "",
    ]
    if audit.recommendations:
        lines += ["### Recommendation", "", *[f"- {r}" for r in audit.recommendations], ""]
    return "\n".join(lines)


def write(report: AuditReport, report_dir: Path) -> list[Path]:
    """Write the JSON, Markdown and HTML reports and the histograms; returns their paths."""
    for audit in report.stores:
        audit.histogram_png = _histogram(audit, report, report_dir)
    t = report.thresholds
    header = [
        f"# Partition audit of keyspace `{report.keyspace}`: {report.status.upper()}",
        "",
        f"Generated {report.generated_at}. Thresholds: warn over {human_bytes(t.warn_bytes)}"
        + (f" or {t.warn_entries} entries" if t.warn_entries else "")
        + f", fail over {human_bytes(t.fail_bytes)}"
        + (f" or {t.fail_entries} entries" if t.fail_entries else "")
        + f"; policy `{report.policy}`. Scanned in {report.seconds:.1f} s ({report.rows_per_s:,.0f} rows/s, "
        f"{report.token_ranges} token ranges per store). nodetool: {report.nodetool or 'not used'}.",
        "",
        reports.table(
            ["store", "type", "partitions", "entries", "largest", "status"],
            [
                [
                    a.store,
                    a.store_type,
                    a.partitions,
                    a.entries,
                    human_bytes(a.largest.bytes if a.largest else None),
                    a.level,
                ]
                for a in report.stores
            ],
        ),
        "",
    ]
    markdown = "\n".join(header + [_store_section(a) for a in report.stores])
    paths = [reports.write_json(report_dir / f"{NAME}.json", report)]
    paths += reports.write_markdown_and_html(report_dir, NAME, f"Partition audit {report.keyspace}", markdown)
    paths += [report_dir / a.histogram_png for a in report.stores if a.histogram_png]
    return paths
