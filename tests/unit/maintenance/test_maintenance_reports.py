"""Report writing and progress output (no services)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime

from statestore.maintenance.shared import reports
from statestore.maintenance.shared.selection import Level, Policy
from statestore.present.progress import Progress


@dataclass
class Inner:
    level: Level
    policy: Policy
    at: datetime
    raw: bytes


def test_reports_serialize_dataclasses_enums_times_and_bytes(tmp_path):
    path = reports.write_json(
        tmp_path / "r.json", {"items": [Inner(Level.FAIL, Policy.WARN, datetime(2026, 1, 2), b"\x01")]}
    )
    assert json.loads(path.read_text()) == {
        "items": [{"level": "fail", "policy": "warn", "at": "2026-01-02T00:00:00", "raw": "01"}]
    }


def test_markdown_tables_escape_pipes_and_render_to_html(tmp_path):
    text = "# Title\n\n" + reports.table(["a", "b"], [["x|y", None], [1, "two\nlines"]])
    assert "x\\|y" in text and "| 1 | two lines |" in text
    md, html = reports.write_markdown_and_html(tmp_path, "report", "Report", text)
    assert md.read_text() == text
    rendered = html.read_text()
    assert "<h1>Title</h1>" in rendered and "<td>x|y</td>" in rendered and "<table>" in rendered


def test_histogram_is_a_png(tmp_path):
    path = reports.histogram_png(tmp_path / "h.png", "sizes", ["1 KiB", "2 KiB"], [3, 0], {"warn": 1.2})
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_progress_logs_lines_off_a_terminal(caplog):
    caplog.set_level(logging.INFO, logger="statestore.maintenance")
    progress = Progress(4, "scanning", log_every_s=0, tty=False)
    progress.advance_to(2)
    progress.advance_to(1)  # never goes back
    progress.advance_to(9)  # never past the total
    progress.close()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("scanning: 2/4 ranges") and lines[-1].startswith("scanning: 4/4 ranges done")
    assert progress.done == 4
