"""The CLI over a window aggregate store on the real stack: get (a key's windows), windows and
dump (every format), top (the latest windows' top keys by a measure) and count show each window
with a column per measure, typed, not the stored accumulator bytes."""

from __future__ import annotations

import csv
import io
import json

import pytest

from statestore.cli.main import main
from statestore.core.errors import OptionError
from statestore.store import admin
from tests.integration import aggregate_stores
from tests.integration.aggregate_stores import BIG, MINUTE, START

MEASURES = ["n", "total", "units", "lo", "hi", "city", "users"]
COLUMNS = ["key", "window_start", "window_end", *MEASURES]


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def windows(session, keyspace):
    return aggregate_stores.fill_windows(session, keyspace, "cli_window_orders")[1]


def _row(key: str, start: int, results: dict) -> dict:
    return {"key": key, "window_start": start, "window_end": start + MINUTE, **results}


def _every(windows) -> list[dict]:
    return [_row(k, s, windows[(k, s)]) for k, s in sorted(windows)]


def test_get_shows_the_keys_windows_each_with_its_measures(capsys, keyspace, windows):
    ks = ("--keyspace", keyspace)
    code, out, _ = _run(capsys, "get", "cli_window_orders", "alice", *ks)
    found = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and found == [
        {"window_start": s, "window_end": s + MINUTE, **windows[("alice", s)]}
        for s in (START + MINUTE, START + 2 * MINUTE)
    ]
    assert list(found[0]) == ["window_start", "window_end", *MEASURES]
    assert f'"units": {BIG}' in out  # alice's newest window: exact, past a long
    code, out, _ = _run(capsys, "get", "cli_window_orders", "bob", "--format", "jsonl", *ks)
    assert [json.loads(line) for line in out.splitlines()] == [
        _row("bob", s, windows[("bob", s)]) for s in (START, START + 2 * MINUTE)
    ]
    assert _run(capsys, "get", "cli_window_orders", "nobody", *ks)[0] == 3


def test_windows_and_dump_show_a_column_per_measure_in_every_format(capsys, keyspace, windows):
    ks = ("--keyspace", keyspace)
    for command in ("windows", "dump"):
        code, out, _ = _run(capsys, command, "cli_window_orders", "--format", "csv", *ks)
        rows = list(csv.reader(io.StringIO(out)))
        assert code == 0 and rows[0] == COLUMNS
        assert [r[:4] for r in rows[1:]] == [
            [k, str(s), str(s + MINUTE), str(windows[(k, s)]["n"])] for k, s in sorted(windows)
        ]
        for fmt in ("json", "jsonl"):
            code, out, _ = _run(capsys, command, "cli_window_orders", "--format", fmt, *ks)
            found = json.loads(out) if fmt == "json" else [json.loads(line) for line in out.splitlines()]
            assert found == _every(windows)
        code, out, _ = _run(capsys, command, "cli_window_orders", "--format", "table", *ks)
        lines = out.splitlines()
        assert lines[0].split() == COLUMNS and lines[1].split()[:4] == [
            "alice",
            str(START + MINUTE),
            str(START + 2 * MINUTE),
            "2",
        ]
    code, out, _ = _run(capsys, "windows", "cli_window_orders", "bob", "--format", "jsonl", *ks)
    assert [json.loads(line) for line in out.splitlines()] == [r for r in _every(windows) if r["key"] == "bob"]


def test_top_ranks_the_latest_windows_keys_by_a_measure_and_count_counts_windows(capsys, keyspace, windows):
    ks = ("--keyspace", keyspace)
    code, out, _ = _run(capsys, "top", "cli_window_orders", "--format", "jsonl", *ks)
    newest, middle, oldest = START + 2 * MINUTE, START + MINUTE, START
    order = [("bob", newest), ("alice", newest), ("carol", middle), ("alice", middle), ("bob", oldest)]  # by n
    assert code == 0 and [json.loads(line) for line in out.splitlines()] == [
        _row(k, s, windows[(k, s)]) for k, s in order
    ]
    code, out, _ = _run(
        capsys, "top", "cli_window_orders", "--by", "hi", "-n", "1", "--windows", "2", "--format", "csv", *ks
    )
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == COLUMNS and [(r[0], int(r[1])) for r in rows[1:]] == [("alice", newest), ("alice", middle)]
    code, _, err = _run(capsys, "top", "cli_window_orders", "--by", "city", *ks)
    assert code == 2 and "not a number to rank by" in err
    assert _run(capsys, "count", "cli_window_orders", *ks)[:2] == (0, "5\n")


def test_the_count_ranking_of_the_latest_windows_refuses_a_store_of_measures(session, keyspace, windows):
    """admin.latest_windows ranks by one count; a store of measures has none: a clear refusal
    naming `top --by`, not the TypeError of negating a dict (the store page's old failure)."""
    with pytest.raises(OptionError, match=r"keeps measures .*`statestore top cli_window_orders --by MEASURE`"):
        admin.latest_windows(session, keyspace, "cli_window_orders")
