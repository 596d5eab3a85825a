"""How the CLI writes what it found: rows in the one set of formats (statestore.present.text's
table, CSV and JSON lines, plus one JSON document), and single records of named fields."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from statestore.present.text import emit as emit_text
from statestore.present.text import to_json


def emit(rows: Iterable[Sequence], header: Sequence[str], fmt: str, out: TextIO | None = None) -> int:
    """Write `rows` as `fmt` (table, csv, json, jsonl); returns how many. json is one array of
    objects, written as the rows come (a long scan is not held in memory)."""
    out = sys.stdout if out is None else out
    if fmt != "json":
        return emit_text(rows, header, fmt, out)
    count = 0
    for row in rows:
        item = json.dumps(dict(zip(header, map(to_json, row), strict=True)), ensure_ascii=False)
        out.write(("[\n  " if count == 0 else ",\n  ") + item)
        count += 1
    out.write("[]\n" if count == 0 else "\n]\n")
    return count


def emit_record(record: dict[str, Any], fmt: str, table: str, out: TextIO | None = None) -> None:
    """One record: `table` (already rendered) for table, else the dict as JSON (json indented,
    jsonl on one line) or as CSV (a header row of its fields, one row; nested values as JSON)."""
    out = sys.stdout if out is None else out
    if fmt == "csv":
        emit_text([tuple(record.values())], tuple(record), fmt, out)
    elif fmt == "json":
        out.write(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    elif fmt == "jsonl":
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
    else:
        out.write(table)


def name_value_lines(rows: Sequence[tuple[str, str]]) -> str:
    """`name  value` lines, the names padded to one width."""
    width = max(len(name) for name, _ in rows)
    return "".join(f"{name.ljust(width)}  {value}\n" for name, value in rows)
