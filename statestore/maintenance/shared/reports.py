"""Writing job reports: JSON for machines, Markdown and HTML for people, PNG histograms.

Every job writes `<report-dir>/<job>.json`, `<job>.md` and `<job>.html` (plus its images);
the file names are fixed so the DAG publishes the same paths on every run.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from datetime import date, datetime
from pathlib import Path
from typing import Any

from statestore.maintenance.shared.units import human_bytes


def jsonable(value: Any) -> Any:
    """Dataclasses, enums and datetimes as plain JSON values, recursively."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value if not isinstance(value, int) else value.name.lower()
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    return value


def write_json(path: Path, report: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(jsonable(report), indent=2, sort_keys=False) + "\n")
    return path


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table; '|' in cells is escaped."""

    def cell(value: Any) -> str:
        return str("" if value is None else value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; }}
th {{ background: #f3f3f3; }}
img {{ max-width: 100%; }}
code {{ background: #f6f6f6; padding: 0 0.2em; }}
</style></head><body>
{body}
</body></html>
"""


def write_markdown_and_html(report_dir: Path, name: str, title: str, markdown: str) -> tuple[Path, Path]:
    """`<name>.md` and the same rendered as a standalone `<name>.html`."""
    # markdown-it-py and matplotlib are the optional `maintenance` extra: imported when a report is written.
    from markdown_it import MarkdownIt

    report_dir.mkdir(parents=True, exist_ok=True)
    md_path = report_dir / f"{name}.md"
    md_path.write_text(markdown)
    html = MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown)
    html_path = report_dir / f"{name}.html"
    html_path.write_text(_HTML.format(title=title, body=html))
    return md_path, html_path


def histogram_png(path: Path, title: str, labels: list[str], counts: list[int], marks: dict[str, float]) -> Path:
    """A bar chart of partition counts per size bucket; `marks` draws labelled vertical
    lines (e.g. the thresholds) at bucket positions."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=100)
    try:
        positions = list(range(len(labels)))
        ax.bar(positions, counts, color="#4c72b0")
        ax.set_xticks(positions, labels, rotation=45, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylim(bottom=0.5, top=max([*counts, 1]) * 2)
        ax.set_ylabel("partitions (log scale)")
        ax.set_xlabel("partition size (bucket from)")
        ax.set_title(title)
        for name, position in marks.items():
            ax.axvline(position, color="#c44e52", linestyle="--", linewidth=1)
            ax.text(position, max(counts or [1]), f" {name}", color="#c44e52", fontsize=8, va="top")
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path


def size(value: int | None) -> str:
    return human_bytes(value)
