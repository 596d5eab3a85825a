"""Check that every benchmark figure in BENCHMARKS.md comes from a raw result file, and that the
figures README.md and docs/ cite are BENCHMARKS.md's current ones.

    python bench/check_figures.py                      # BENCHMARKS.md against bench/results
    python bench/check_figures.py README.md docs/*.md  # also the citations in these files
    python bench/check_figures.py --strict README.md   # and no benchmark-like figure without one

**Checked tables** (BENCHMARKS.md). A Markdown table whose header has the columns `figure`,
`raw` and `key` is checked row by row: `raw` names a file under bench/results (as a link or in
backticks), `key` says where the figure is in it, and `figure` must be the raw value rounded
to the decimals the figure shows (`238,253` is a value in [238252.5, 238253.5); `0.69×` one in
[0.685, 0.695); a figure with no digits, such as `AMD EPYC`, must equal the raw text). A key is

- a path into a JSON file: `summary.systems.partitioned.words_per_s`, `runs[1].wall_s`,
  `summary.systems.partitioned.restart_cold.10000000` (dots between names, `[i]` for a list
  item; a name may hold spaces, as in `machine.cpu model`);
- arithmetic on such paths and numbers, with the operator between spaces:
  `summary.systems.partitioned.words_per_s_runs[0] / summary.systems.rocksdb.words_per_s_runs[0]`,
  `settings.script_s / 60`;
- for a text file (a report or a log), a regular expression between slashes whose first group is
  the figure: `/replay-safe round 1: .*? (\\d+) words\\/s/`.

A checked table with an `id` column is *current*: its ids are what other Markdown files may cite.
Tables without ids (the changelog's) are checked the same way but cannot be cited.

**Citations** (README.md, docs/*.md). A figure taken from the benchmarks is followed by an HTML
comment naming the id of its row in BENCHMARKS.md's current tables, which renders as nothing:

    our job counts 0.69×<!-- bench: throughput.x_rocksdb --> Spark's RocksDB store's rate

The figure before the comment (the text since the last space or `(`, bold marks ignored) must be
that row's figure, and the id must exist. With `--strict`, a figure that looks like a
measurement (a number before words/s, req/s, rows/s, entries/s, keys/s, "words per" or ×, or a
p50/p90/p99 in ms) and has no citation is an error too, unless `<!-- setting -->` follows it
(an input rate, a timeout: a number the reader sets, not one a benchmark measured).

Exit status 1 when anything fails, each failure on a line of its own.
"""

from __future__ import annotations

import argparse
import ast
import json
import operator
import re
import sys
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
RESULTS = PROJECT / "bench" / "results"
BENCHMARKS = PROJECT / "BENCHMARKS.md"

_NUMBER = re.compile(r"[-−]?\d[\d,]*(?:\.\d+)?")
_PATH_TOKEN = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_CITE = re.compile(r"(?P<figure>[^\s(]*?)(?:\*\*)?\s*<!--\s*bench:\s*(?P<id>[\w.\-]+)\s*-->")
_UNITS = r"(?:words/s|req/s|rows/s|entries/s|deletes/s|keys/s|words per|×)"
_NOT_CITED = r"(?!\s*<!--\s*(?:bench:|setting\b))"
_UNCITED = re.compile(
    r"(?<![\w.#/-])(?:(\d[\d,]*(?:\.\d+)?)(?:\*\*)?\s?" + _UNITS + r"|p(?:50|90|99)\s+\d[\d.]*\s?ms)" + _NOT_CITED
)


class FigureError(ValueError):
    """A figure its raw file does not hold, or a row or citation that cannot be checked."""


@dataclass(frozen=True)
class Row:
    """One row of a checked table."""

    source: str  # file:line
    figure: str
    raw: str
    key: str
    id: str | None


# --------------------------------------------------------------------------- tables


def _cells(line: str) -> list[str]:
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|"):
        body = body[:-1]
    return [c.strip() for c in re.split(r"(?<!\\)\|", body)]


def checked_rows(text: str, name: str = "BENCHMARKS.md") -> list[Row]:
    """The rows of every table in `text` whose header has the columns figure, raw and key."""
    rows: list[Row] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("|") and i + 1 < len(lines) and re.match(r"^\s*\|[\s:|-]+\|\s*$", lines[i + 1]):
            header = [c.lower() for c in _cells(line)]
            j = i + 2
            if {"figure", "raw", "key"} <= set(header):
                col = {h: header.index(h) for h in ("figure", "raw", "key")}
                id_col = header.index("id") if "id" in header else None
                while j < len(lines) and lines[j].lstrip().startswith("|"):
                    cells = _cells(lines[j])
                    if len(cells) != len(header):
                        raise FigureError(f"{name}:{j + 1}: {len(cells)} cells under a header of {len(header)}")
                    rows.append(
                        Row(
                            source=f"{name}:{j + 1}",
                            figure=cells[col["figure"]],
                            raw=_raw_path(cells[col["raw"]]),
                            key=cells[col["key"]].strip("`").replace("\\|", "|"),
                            id=cells[id_col].strip("`") if id_col is not None else None,
                        )
                    )
                    j += 1
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                j += 1
            i = j
        else:
            i += 1
    return rows


def _raw_path(cell: str) -> str:
    link = re.search(r"\]\(([^)]+)\)", cell)
    text = link.group(1) if link else cell.strip("` ")
    return text.removeprefix("bench/results/")


# --------------------------------------------------------------------------- raw values


def _json_path(data: object, path: str) -> object:
    value = data
    pos = 0
    for match in _PATH_TOKEN.finditer(path):
        if match.start() != pos:
            raise FigureError(f"cannot read the path {path!r}")
        name, index = match.groups()
        try:
            value = value[int(index)] if index is not None else value[name]  # type: ignore[index]
        except (KeyError, IndexError, TypeError) as exc:
            raise FigureError(f"no {path!r} in the raw file (at {match.group(0)!r})") from exc
        pos = match.end()
    if pos != len(path):
        raise FigureError(f"cannot read the path {path!r}")
    return value


def _arith(expr: str, lookup) -> object:
    """`expr` with each operand (split at ' / ', ' * ', ' + ', ' - ') a number or a path."""
    parts = re.split(r" ([/*+-]) ", expr)
    if len(parts) == 1:
        return lookup(expr)
    names: dict[str, object] = {}
    source = []
    for k, part in enumerate(parts):
        if k % 2:
            source.append(part)
        elif re.fullmatch(r"\d+(?:\.\d+)?", part):
            source.append(part)
        else:
            names[f"v{k}"] = lookup(part)
            source.append(f"v{k}")

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return node.value
        if isinstance(node, ast.Name) and isinstance(names.get(node.id), int | float):
            return names[node.id]  # type: ignore[return-value]
        raise FigureError(f"cannot compute {expr!r}")

    return ev(ast.parse(" ".join(source), mode="eval").body)


def raw_value(raw: str, key: str, results: Path = RESULTS) -> object:
    """The value `key` names in bench/results/`raw`."""
    path = results / raw
    if not path.is_file():
        raise FigureError(f"no raw file bench/results/{raw}")
    text = path.read_text(encoding="utf-8", errors="replace")
    if key.startswith("/") and key.endswith("/") and len(key) > 1:
        match = re.search(key[1:-1], text)
        if not match:
            raise FigureError(f"{key} matches nothing in bench/results/{raw}")
        return match.group(1)
    if path.suffix != ".json":
        raise FigureError(f"bench/results/{raw} is not JSON: give the key as /regex/")
    data = json.loads(text)
    return _arith(key, lambda p: _json_path(data, p))


def _as_number(text: str) -> Decimal | None:
    match = _NUMBER.search(text.replace("**", ""))
    if not match:
        return None
    return Decimal(match.group(0).replace(",", "").replace("−", "-"))


def matches(figure: str, value: object) -> bool:
    """Whether `figure` (as written) is `value` rounded to the decimals the figure shows."""
    shown = _as_number(figure)
    if shown is None or (isinstance(value, str) and _as_number(value) is None):
        return figure.replace("**", "").strip() == str(value).strip()
    number = _as_number(value) if isinstance(value, str) else value
    if isinstance(number, bool) or not isinstance(number, int | float | Decimal):
        return False
    exponent = shown.as_tuple().exponent
    step = Decimal(1).scaleb(exponent if isinstance(exponent, int) else 0)
    return abs(Decimal(str(number)) - shown) <= step / 2 + Decimal("1e-12")


def check_rows(rows: list[Row], results: Path = RESULTS) -> list[str]:
    """One message per row whose figure its raw file does not hold (and per duplicate id)."""
    errors: list[str] = []
    seen: dict[str, str] = {}
    for row in rows:
        if row.id:
            if row.id in seen:
                errors.append(f"{row.source}: id {row.id!r} also at {seen[row.id]}")
            seen[row.id] = row.source
        try:
            value = raw_value(row.raw, row.key, results)
        except (FigureError, json.JSONDecodeError, re.error) as exc:
            errors.append(f"{row.source}: {exc}")
            continue
        if not matches(row.figure, value):
            errors.append(f"{row.source}: {row.figure!r} is not {value!r} (bench/results/{row.raw}, {row.key})")
    return errors


def current_figures(benchmarks: Path = BENCHMARKS) -> dict[str, str]:
    """id -> figure of BENCHMARKS.md's current tables (those with an id column)."""
    return {r.id: r.figure for r in checked_rows(benchmarks.read_text(encoding="utf-8")) if r.id}


def check_benchmarks(benchmarks: Path = BENCHMARKS, results: Path = RESULTS) -> list[str]:
    """Every checked row of BENCHMARKS.md against its raw file."""
    try:
        rows = checked_rows(benchmarks.read_text(encoding="utf-8"), benchmarks.name)
    except FigureError as exc:
        return [str(exc)]
    if not rows:
        return [f"{benchmarks.name}: no checked table (columns figure, raw, key)"]
    return check_rows(rows, results)


def uncited_results(benchmarks: Path = BENCHMARKS, results: Path = RESULTS) -> list[str]:
    """Entries of bench/results that BENCHMARKS.md does not name (lab notebooks, stale runs)."""
    text = benchmarks.read_text(encoding="utf-8")
    named = {c.rstrip("/.") for c in re.findall(r"bench/results/([\w./-]+)", text)}
    cited = {r.raw for r in checked_rows(text)} | named
    # A file cited by name, a folder cited as a whole, and the files beside a cited file (one run's
    # report, plots and raw JSON belong together).
    folders = {c for c in cited if (results / c).is_dir()} | {c.rpartition("/")[0] for c in cited if "/" in c}
    out = []
    for path in sorted(p for p in results.rglob("*") if p.is_file()):
        rel = path.relative_to(results).as_posix()
        if rel not in cited and not any(rel.startswith(f + "/") for f in folders):
            out.append(f"bench/results/{rel}: cited nowhere in {benchmarks.name}")
    return out


# --------------------------------------------------------------------------- other Markdown


def check_citations(path: Path, benchmarks: Path = BENCHMARKS, strict: bool = False) -> list[str]:
    """The `<!-- bench: ID -->` citations of a Markdown file against BENCHMARKS.md's current
    tables; with `strict`, also every benchmark-like figure without a citation."""
    figures = current_figures(benchmarks)
    errors = []
    in_code = False
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        for cite in _CITE.finditer(line):
            want = figures.get(cite["id"])
            if want is None:
                errors.append(f"{path}:{n}: no current figure with id {cite['id']!r} in {benchmarks.name}")
            elif _as_number(cite["figure"]) != _as_number(want) or _as_number(want) is None:
                errors.append(f"{path}:{n}: {cite['figure']!r} cites {cite['id']!r}, whose figure is {want!r}")
        if strict:
            bare = re.sub(r"`[^`]*`", "", _CITE.sub("", line))
            for m in _UNCITED.finditer(bare):
                errors.append(f"{path}:{n}: figure {m.group(0).strip()!r} cites no benchmark (<!-- bench: ID -->)")
    return errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path, help="Markdown files whose citations to check")
    parser.add_argument("--strict", action="store_true", help="a benchmark-like figure must cite its row")
    parser.add_argument("--benchmarks", type=Path, default=BENCHMARKS)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    errors = check_benchmarks(args.benchmarks, args.results) + uncited_results(args.benchmarks, args.results)
    for path in args.files:
        errors += check_citations(path, args.benchmarks, args.strict)
    for line in errors:
        print(line, file=sys.stderr)
    if not errors:
        print(f"{len(checked_rows(args.benchmarks.read_text(encoding='utf-8')))} figures found in bench/results")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
