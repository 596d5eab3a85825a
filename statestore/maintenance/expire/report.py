"""The expiry's report files: expire_state.json / .md / .html."""

from __future__ import annotations

from pathlib import Path

from statestore.maintenance.expire.entries import ExpiryReport
from statestore.maintenance.shared import reports

NAME = "expire_state"


def _retention(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def write(report: ExpiryReport, report_dir: Path) -> list[Path]:
    dry = any(s.dry_run for s in report.stores)
    lines = [
        f"# Expiry in keyspace `{report.keyspace}`" + (" (dry run: nothing deleted)" if dry else ""),
        "",
        f"Generated {report.generated_at}. Scanned in {report.seconds:.1f} s ({report.rows_per_s:,.0f} rows/s).",
        "",
        reports.table(
            [
                "store",
                "basis",
                "retention",
                "cutoff",
                "stream time",
                "scanned",
                "removed",
                "kept",
                "undated",
                "table TTL",
            ],
            [
                [
                    s.store if s.unit == "entries" else f"{s.store} ({s.unit})",
                    s.basis,
                    _retention(s.retention_ms),
                    s.cutoff,
                    s.stream_time or "-",
                    s.scanned,
                    f"{s.scanned - s.kept} (dry run)" if s.dry_run else s.removed,
                    s.kept,
                    s.undated,
                    f"{s.table_ttl_s} s" if s.table_ttl_s else "none",
                ]
                for s in report.stores
            ],
        ),
        "",
        "An entry expires when its event time (stream basis) or its last write time (processing basis) is "
        "before the cutoff. Entries without an event time are kept (undated). Each delete carries the write "
        "time read, so an update landing meanwhile wins and the entry stays. Window stores (marked "
        "'segments') count storage segments: a segment whose every window started a retention or more before "
        "the stream time is dropped whole, by the store's own retention.",
        "",
    ]
    for s in report.stores:
        if s.reclaim:
            lines += [f"Space of `{s.store}`'s dropped segments: {s.reclaim}.", ""]
        if s.removed_sample:
            lines += [f"First keys removed from `{s.store}`: " + ", ".join(f"`{k}`" for k in s.removed_sample), ""]
    paths = [reports.write_json(report_dir / f"{NAME}.json", report)]
    paths += reports.write_markdown_and_html(report_dir, NAME, f"Expiry {report.keyspace}", "\n".join(lines))
    return paths
