"""BENCHMARKS.md states no figure its raw results do not hold (bench/check_figures.py), every file
under bench/results is cited by it, and the checker itself reads, rounds and cites as documented."""

from __future__ import annotations

import json
from pathlib import Path

import check_figures as cf
import pytest


def test_every_figure_of_benchmarks_md_is_in_its_raw_file():
    assert cf.check_benchmarks() == []


def test_every_result_file_is_cited_by_benchmarks_md():
    assert cf.uncited_results() == []


def test_the_current_figures_come_from_the_latest_runs_only():
    rows = [r for r in cf.checked_rows(cf.BENCHMARKS.read_text(encoding="utf-8")) if r.id]
    assert len(rows) > 30
    # the benchmarks re-run on today's code; the others' runs are listed apart, never current
    current = {
        "streaming_compare",
        "timed_compare",
        "aggregate_compare",
        "dataframe_scan",
        "rescale",
        "cluster_throughput",
        "overload",
        "soak",
        "many_stores",
    }
    assert {r.raw.split("/")[0] for r in rows} == current
    assert not any(r.raw.startswith("history/") for r in rows)


def test_the_machine_is_the_one_the_raw_files_record():
    figures = cf.current_figures()
    assert figures["machine.cpu"] == "AMD EPYC"
    assert "Intel" not in cf.BENCHMARKS.read_text(encoding="utf-8")


MARKDOWN = [p for p in [cf.PROJECT / "README.md", *sorted((cf.PROJECT / "docs").glob("**/*.md"))] if p.is_file()]


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: p.relative_to(cf.PROJECT).as_posix())
def test_citations_in_readme_and_docs_name_current_figures(path: Path):
    assert cf.check_citations(path, strict=True) == []  # and no benchmark-like figure without a citation


@pytest.mark.parametrize(
    ("figure", "value", "ok"),
    [
        ("238,253", 238252.61, True),
        ("238,252", 238252.61, False),
        ("**0.69×**", 0.6871, True),
        ("0.68×", 0.6871, False),
        ("0.50", 0.49828, True),
        ("-27.1", "-27.1", True),
        ("2,535", "2,535", True),
        ("AMD EPYC", "AMD EPYC", True),
        ("Intel Xeon", "AMD EPYC", False),
        ("1", True, False),
    ],
)
def test_a_figure_is_its_raw_value_rounded_as_shown(figure, value, ok):
    assert cf.matches(figure, value) is ok


@pytest.fixture
def results(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    (root / "run").mkdir(parents=True)
    raw = {"summary": {"a b": {"x": 0.6871, "runs": [222760.3, 351896.4]}, "y": 4.0}}
    (root / "run" / "r.json").write_text(json.dumps(raw))
    (root / "run" / "r.log").write_text("overhead -27.1% (ratio of medians)\n")
    return root


def _doc(tmp_path: Path, rows: str) -> Path:
    doc = tmp_path / "B.md"
    doc.write_text("| id | figure | raw | key |\n|---|---|---|---|\n" + rows)
    return doc


def test_paths_arithmetic_and_regular_expressions(results: Path, tmp_path: Path):
    doc = _doc(
        tmp_path,
        "| x | 0.69× | [r](bench/results/run/r.json) | `summary.a b.x` |\n"
        "| r | 0.63× | `run/r.json` | `summary.a b.runs[0] / summary.a b.runs[1]` |\n"
        "| m | 2.0 | `run/r.json` | `summary.y / 2` |\n"
        "| o | -27.1% | `run/r.log` | `/overhead (-?[\\d.]+)%/` |\n",
    )
    assert cf.check_benchmarks(doc, results) == []
    assert cf.uncited_results(doc, results) == []


def test_a_wrong_figure_a_missing_key_and_a_missing_file_fail(results: Path, tmp_path: Path):
    doc = _doc(
        tmp_path,
        "| x | 0.70× | `run/r.json` | `summary.a b.x` |\n"
        "| y | 1 | `run/r.json` | `summary.nope` |\n"
        "| z | 1 | `run/none.json` | `summary.y` |\n"
        "| x | 0.69× | `run/r.json` | `summary.a b.x` |\n",
    )
    errors = cf.check_benchmarks(doc, results)
    assert len(errors) == 4
    assert "'0.70×' is not 0.6871" in errors[0]
    assert "no 'summary.nope'" in errors[1]
    assert "no raw file" in errors[2]
    assert "id 'x' also at" in errors[3]


def test_an_uncited_result_file_is_reported(results: Path, tmp_path: Path):
    (results / "lab_notebook").mkdir()
    (results / "lab_notebook" / "r.json").write_text("{}")
    doc = _doc(tmp_path, "| x | 0.69× | `run/r.json` | `summary.a b.x` |\n")
    assert cf.uncited_results(doc, results) == ["bench/results/lab_notebook/r.json: cited nowhere in B.md"]


def test_citations_must_name_a_current_id_and_repeat_its_figure(results: Path, tmp_path: Path):
    doc = _doc(tmp_path, "| tp.x | **0.69×** | `run/r.json` | `summary.a b.x` |\n")
    page = tmp_path / "page.md"
    page.write_text(
        "Ours runs at **0.69×**<!-- bench: tp.x --> RocksDB's rate.\n"
        "Ours runs at 0.70×<!-- bench: tp.x --> RocksDB's rate.\n"
        "Ours runs at 0.69× <!-- bench: tp.nope -->.\n"
        "```\n0.5× in a code block is not a claim\n```\n"
        "An uncited 120,000 words/s.\n"
    )
    errors = cf.check_citations(page, doc)
    assert len(errors) == 2
    assert "page.md:2: '0.70×' cites 'tp.x'" in errors[0]
    assert "no current figure with id 'tp.nope'" in errors[1]
    strict = cf.check_citations(page, doc, strict=True)
    assert strict[2:] == [f"{page}:7: figure '120,000 words/s' cites no benchmark (<!-- bench: ID -->)"]


def test_the_changelog_cannot_be_cited(results: Path, tmp_path: Path):
    doc = tmp_path / "B.md"
    doc.write_text(
        "| date | figure | raw | key |\n|---|---|---|---|\n| 25 Nov | 0.69× | `run/r.json` | `summary.a b.x` |\n"
    )
    assert cf.check_benchmarks(doc, results) == []
    assert cf.current_figures(doc) == {}
