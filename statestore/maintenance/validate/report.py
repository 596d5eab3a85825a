"""The validation's report files: validate_idempotency.json / .md / .html (Data Docs beside)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from statestore.maintenance.shared import reports
from statestore.maintenance.validate.idempotency import ValidationReport

NAME = "validate_idempotency"


def _when(ms: int | None) -> str:
    return "-" if ms is None else datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


def _per(counted_per: str) -> str:
    return "" if counted_per == "key" else f", once per {counted_per} they count in"


def _entries(counted_per: str) -> str:
    return {"key": "words", "window": "(word, window) pairs", "session": "(word, session) pairs"}[counted_per]


def _aggregate_recompute(r) -> list[str]:
    """The recompute section of an aggregate store: its figures and each measure's rule."""
    return [
        f"The input topic(s) {', '.join(r.topics) or '-'} from `{r.starting_offsets}` up to the committed offsets "
        f"`{r.ending_offsets}` (batch {r.last_batch_id}) were recomputed with the stream's own input and aggregate "
        f"stages and compared with the store, measure by measure: **{'pass' if r.passed else 'FAIL'}** in "
        f"{r.seconds:.1f} s.",
        "",
        reports.table(
            ["figure", "value"],
            [
                ["records counted in the input", r.input_words],
                [
                    {
                        "key": "records the input stage could not count (dead letters)",
                        "window": "records the input stage could not count, or late in a window (dead letters)",
                        "session": "records the input stage could not count, or late (dead letters)",
                    }[r.counted_per],
                    r.uncountable,
                ],
                [
                    "keys in the input" if r.counted_per == "key" else f"(key, {r.counted_per}) pairs in the input",
                    r.input_keys,
                ],
                ["entries in the store", r.store_entries],
                ["latest expiry cutoff", _when(r.expired_before_ms)],
                ["keys not compared (input before the cutoff: maybe restarted)", r.not_compared],
                ["differences", r.differences],
            ],
        ),
        "",
        "Measures checked:",
        "",
        reports.table(
            ["measure", "aggregation", "field", "compared"],
            [[m["measure"], m["aggregation"], m["field"] or "-", m["compared"]] for m in r.measures],
        ),
        "",
    ]


def _differences(r) -> list[str]:
    if r.measures:  # an aggregate store's: per measure (a window or session store's: per key and span)
        windowed = r.counted_per != "key"
        return [
            f"First differences (all of them: `{r.differences_file}`):",
            "",
            reports.table(
                [
                    "key",
                    *([r.counted_per] if windowed else []),
                    "kind",
                    "measure",
                    "store",
                    "input",
                    "store time",
                    "input time",
                ],
                [
                    [
                        d.key,
                        *([f"[{d.window_start}, {d.window_end}]"] if windowed else []),
                        d.kind,
                        d.measure or "-",
                        d.stored,
                        d.expected,
                        d.stored_time_ms,
                        d.expected_time_ms,
                    ]
                    for d in r.first_differences
                ],
            ),
            "",
        ]
    return [
        f"First differing keys (all of them: `{r.differences_file}`):",
        "",
        reports.table(
            ["key", "window", "kind", "store", "input", "at least", "store time", "input time"],
            [
                [
                    d.key,
                    "-" if d.window_start is None else f"[{d.window_start}, {d.window_end}]",
                    d.kind,
                    d.stored,
                    d.expected,
                    d.expected_at_least,
                    d.stored_time_ms,
                    d.expected_time_ms,
                ]
                for d in r.first_differences
            ],
        ),
        "",
    ]


def _word_count_recompute(r) -> list[str]:
    return [
        f"The input topic(s) {', '.join(r.topics) or '-'} from `{r.starting_offsets}` up to the committed offsets "
        f"`{r.ending_offsets}` (batch {r.last_batch_id}) were recounted with the stream's own tokenizer and compared "
        f"with the store: **{'pass' if r.passed else 'FAIL'}** in {r.seconds:.1f} s.",
        "",
        reports.table(
            ["figure", "value"],
            [
                [f"words in the input{_per(r.counted_per)}", r.input_words],
                [f"distinct {_entries(r.counted_per)} in the input", r.input_keys],
                ["entries in the store", r.store_entries],
                ["sum of the store's counts", r.store_sum],
                ["latest expiry cutoff", _when(r.expired_before_ms)],
                ["words at or after it (the least the store may hold)", r.words_at_least],
                ["differing keys", r.differences],
            ],
        ),
        "",
    ]


def write(report: ValidationReport, report_dir: Path) -> list[Path]:
    r = report.recompute
    lines = [
        f"# Idempotency validation of store `{report.keyspace}.{report.store}`: {report.status.upper()}",
        "",
        f"Generated {report.generated_at}.",
        "",
        "## Recompute",
        "",
        *(_aggregate_recompute(r) if r.measures else _word_count_recompute(r)),
    ]
    if r.first_differences:
        lines += _differences(r)
    lines += ["## Replay", ""]
    if report.replay is None:
        lines += [f"Not run: {report.replay_not_run}.", ""]
    else:
        p = report.replay
        lines += [
            f"**{'pass' if p.passed else 'FAIL'}**: {p.summary} (checkpoint `{p.checkpoint}`, {p.seconds:.1f} s).",
            "",
        ]
    lines += ["## Great Expectations", ""]
    if report.quality is None:
        lines += ["Not run (--no-quality).", ""]
    else:
        q = report.quality
        lines += [
            f"Suite `{q.suite}`: **{'pass' if q.passed else 'FAIL'}**. Data Docs: [{q.data_docs}]({q.data_docs}).",
            "",
            reports.table(
                ["expectation", "column", "success", "observed", "unexpected", "examples"],
                [
                    [e["expectation"], e["column"] or "-", e["success"], e["observed"], e["unexpected"], e["examples"]]
                    for e in q.expectations
                ],
            ),
            "",
        ]
    paths = [reports.write_json(report_dir / f"{NAME}.json", report)]
    paths += reports.write_markdown_and_html(report_dir, NAME, f"Validation {report.store}", "\n".join(lines))
    return paths
