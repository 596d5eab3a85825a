"""The compaction's report files: compact_state.json / .md / .html."""

from __future__ import annotations

from pathlib import Path

from statestore.maintenance.compact.compaction import CompactionReport, StoreCompaction
from statestore.maintenance.shared import reports
from statestore.maintenance.shared.crosscheck import CassandraFigures
from statestore.maintenance.shared.units import human_bytes

NAME = "compact_state"


def _figures_rows(s: StoreCompaction) -> list[list]:
    stages: list[tuple[str, CassandraFigures | None]] = [
        ("before", s.before),
        ("after pruning", s.after_pruning),
        ("after compaction", s.after_compaction),
    ]
    rows = []
    for label, f in stages:
        if f is None:
            continue
        rows.append(
            [
                label,
                f.sstable_count if f.sstable_count is not None else "-",
                human_bytes(f.space_used_live_bytes),
                f.nodetool_partitions if f.nodetool_partitions is not None else f.estimated_partitions,
                human_bytes(f.max_partition_bytes),
                "-" if f.droppable_tombstone_ratio is None else f"{f.droppable_tombstone_ratio:.3f}",
            ]
        )
    return rows


def write(report: CompactionReport, report_dir: Path) -> list[Path]:
    o = report.options
    retention = (
        "none (no pruning)" if o.history_retention_ms is None else f"{o.history_retention_ms // 1000} s ({o.basis})"
    )
    lines = [
        f"# Compaction in keyspace `{report.keyspace}`"
        + (" (dry run: nothing deleted or compacted)" if o.dry_run else ""),
        "",
        f"Generated {report.generated_at} in {report.seconds:.1f} s. History retention: {retention}; tombstone "
        f"threshold {o.tombstone_threshold}; Cassandra compaction: `{o.cassandra_compaction}`.",
        "",
    ]
    for s in report.stores:
        lines += [f"## Store `{s.store}` ({s.store_type})", ""]
        if s.pruned is not None:
            p = s.pruned
            lines += [
                f"History before {s.cutoff} dropped: {p.dropped_versions} of {p.versions} versions over {p.keys} keys, "
                f"{p.dropped_keys} keys deleted before the cutoff removed entirely "
                f"({p.tombstone_versions} deletion versions seen).",
                "",
            ]
            if p.dropped_key_sample:
                lines += ["Keys removed: " + ", ".join(f"`{k}`" for k in p.dropped_key_sample), ""]
        else:
            lines += ["No history pruned (not a versioned store, or no --history-retention).", ""]
        lines += [
            "What Cassandra says about the table:",
            "",
            reports.table(
                ["when", "SSTables", "live space", "partitions", "largest partition", "droppable tombstones"],
                _figures_rows(s),
            ),
            "",
            f"Action: {s.action}.",
            "",
            *[f"- {note}" for note in s.notes],
            "",
        ]
    paths = [reports.write_json(report_dir / f"{NAME}.json", report)]
    paths += reports.write_markdown_and_html(report_dir, NAME, f"Compaction {report.keyspace}", "\n".join(lines))
    return paths
