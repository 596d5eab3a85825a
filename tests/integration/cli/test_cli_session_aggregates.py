"""The CLI over a session aggregate store on the real stack: get (a key's sessions), sessions and
dump (every format), top (sessions ranked by a measure) and count show each session with a column
per measure, typed, not the stored accumulator bytes."""

from __future__ import annotations

import csv
import io
import json

import pytest

from statestore.cli.main import main
from tests.integration import aggregate_stores
from tests.integration.aggregate_stores import BIG

MEASURES = ["n", "total", "units", "lo", "hi", "city", "users"]
COLUMNS = ["key", "session_start", "session_end", *MEASURES]


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def sessions(session, keyspace):
    return aggregate_stores.fill_sessions(session, keyspace, "cli_session_orders")[1]


def _row(key: str, start: int, end: int, results: dict) -> dict:
    return {"key": key, "session_start": start, "session_end": end, **results}


def _every(sessions) -> list[dict]:
    return [_row(*s, sessions[s]) for s in sorted(sessions)]


def test_get_shows_the_keys_sessions_each_with_its_measures(capsys, keyspace, sessions):
    ks = ("--keyspace", keyspace)
    code, out, _ = _run(capsys, "get", "cli_session_orders", "alice", *ks)
    found = [json.loads(line) for line in out.splitlines()]
    alices = sorted(s for s in sessions if s[0] == "alice")
    assert code == 0 and found == [{"session_start": s, "session_end": e, **sessions[(k, s, e)]} for k, s, e in alices]
    assert list(found[0]) == ["session_start", "session_end", *MEASURES]
    assert f'"units": {BIG}' in out  # alice's first session: exact, past a long
    code, out, _ = _run(capsys, "get", "cli_session_orders", "bob", "--format", "jsonl", *ks)
    assert [json.loads(line) for line in out.splitlines()] == [r for r in _every(sessions) if r["key"] == "bob"]
    assert _run(capsys, "get", "cli_session_orders", "nobody", *ks)[0] == 3
    code, _, err = _run(capsys, "get", "cli_session_orders", "alice", "--as-of", "0", *ks)
    assert code == 2 and "session store" in err


def test_sessions_and_dump_show_a_column_per_measure_in_every_format(capsys, keyspace, sessions):
    ks = ("--keyspace", keyspace)
    for command in ("sessions", "dump"):
        code, out, _ = _run(capsys, command, "cli_session_orders", "--format", "csv", *ks)
        rows = list(csv.reader(io.StringIO(out)))
        assert code == 0 and rows[0] == COLUMNS
        assert [r[:4] for r in rows[1:]] == [
            [k, str(s), str(e), str(sessions[(k, s, e)]["n"])] for k, s, e in sorted(sessions)
        ]
        for fmt in ("json", "jsonl"):
            code, out, _ = _run(capsys, command, "cli_session_orders", "--format", fmt, *ks)
            found = json.loads(out) if fmt == "json" else [json.loads(line) for line in out.splitlines()]
            assert found == _every(sessions)
        code, out, _ = _run(capsys, command, "cli_session_orders", "--format", "table", *ks)
        lines = out.splitlines()
        first = min(sessions)
        assert lines[0].split() == COLUMNS and lines[1].split()[:4] == [*map(str, first), "5"]
    code, out, _ = _run(capsys, "sessions", "cli_session_orders", "bob", "--format", "jsonl", *ks)
    assert [json.loads(line) for line in out.splitlines()] == [r for r in _every(sessions) if r["key"] == "bob"]


def test_top_ranks_sessions_by_a_measure_and_count_counts_sessions(capsys, keyspace, sessions):
    ks = ("--keyspace", keyspace)
    code, out, _ = _run(capsys, "top", "cli_session_orders", "--format", "jsonl", *ks)
    by_n = sorted(sessions, key=lambda s: (-sessions[s]["n"], s))  # n, ties by key then start
    assert code == 0 and [json.loads(line) for line in out.splitlines()] == [_row(*s, sessions[s]) for s in by_n]
    code, out, _ = _run(capsys, "top", "cli_session_orders", "--by", "hi", "-n", "2", "--format", "csv", *ks)
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == COLUMNS and [r[0] for r in rows[1:]] == ["alice", "alice"]  # 60.0, then 7.0
    assert [float(r[7]) for r in rows[1:]] == [60.0, 7.0]
    code, _, err = _run(capsys, "top", "cli_session_orders", "--by", "city", *ks)
    assert code == 2 and "not a number to rank by" in err
    assert _run(capsys, "count", "cli_session_orders", *ks)[:2] == (0, "4\n")
