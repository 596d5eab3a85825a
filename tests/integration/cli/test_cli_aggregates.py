"""The CLI over an aggregate store on the real stack: get, dump (every format), all, range,
prefix, top (by its first count or --by a measure) and count show each measure in its column,
typed, not the stored accumulator bytes."""

from __future__ import annotations

import csv
import io
import json

import pytest

from statestore.cli.main import main
from statestore.store.builder import StoreBuilder
from tests.integration import aggregate_stores
from tests.integration.aggregate_stores import BIG

COLUMNS = ["key", "n", "total", "units", "lo", "hi", "city", "users"]


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def orders(session, keyspace):
    return aggregate_stores.fill(session, keyspace, "cli_orders")[1]


def _cells(value) -> list[str]:
    return [
        "" if v is None else v if isinstance(v, str) else json.dumps(v, sort_keys=True).replace(" ", "") for v in value
    ]


def test_get_dump_and_scans_show_a_column_per_measure(capsys, keyspace, orders):
    ks = ("--keyspace", keyspace)
    code, out, _ = _run(capsys, "get", "cli_orders", "alice", *ks)
    assert code == 0 and json.loads(out) == orders["alice"] and list(json.loads(out)) == COLUMNS[1:]
    assert f'"units": {BIG}' in out  # exact, past a long
    code, out, _ = _run(capsys, "get", "cli_orders", "bob", "--format", "jsonl", *ks)
    assert json.loads(out) == {"key": "bob", **orders["bob"]}

    code, out, _ = _run(capsys, "dump", "cli_orders", "--format", "csv", *ks)
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == COLUMNS
    assert rows[1:] == [[k, *_cells(orders[k].values())] for k in sorted(orders)]
    for fmt in ("json", "jsonl"):
        code, out, _ = _run(capsys, "dump", "cli_orders", "--format", fmt, *ks)
        found = json.loads(out) if fmt == "json" else [json.loads(line) for line in out.splitlines()]
        assert found == [{"key": k, **orders[k]} for k in sorted(orders)]
    code, out, _ = _run(capsys, "dump", "cli_orders", "--format", "table", *ks)
    lines = out.splitlines()
    assert lines[0].split() == COLUMNS and lines[1].split()[:4] == ["alice", "5", "12.5", str(BIG)]

    code, out, _ = _run(capsys, "range", "cli_orders", "--from", "b", "--to", "c", "--format", "jsonl", *ks)
    assert [json.loads(line) for line in out.splitlines()] == [{"key": "bob", **orders["bob"]}]
    code, out, _ = _run(capsys, "prefix", "cli_orders", "ca", "--format", "csv", *ks)
    assert out.splitlines()[0] == ",".join(COLUMNS) and out.splitlines()[1].startswith("carol,2,100.0,-6,")
    code, out, _ = _run(capsys, "all", "cli_orders", "--reverse", "--limit", "1", "--format", "jsonl", *ks)
    assert json.loads(out) == {"key": "dave", **orders["dave"]}
    assert _run(capsys, "count", "cli_orders", *ks)[:2] == (0, "4\n")


def test_top_ranks_by_the_first_count_or_the_measure_named(capsys, session, keyspace, orders):
    ks = ("--keyspace", keyspace)
    code, out, _ = _run(capsys, "top", "cli_orders", "--format", "csv", *ks)
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == COLUMNS and [r[0] for r in rows[1:]] == ["bob", "dave", "alice", "carol"]  # n, ties by key
    code, out, _ = _run(capsys, "top", "cli_orders", "--by", "hi", "-n", "3", "--format", "jsonl", *ks)
    assert [json.loads(line) for line in out.splitlines()] == [
        {"key": k, **orders[k]} for k in ("carol", "alice", "bob")
    ]
    code, out, _ = _run(capsys, "top", "cli_orders", "--by", "units", "-n", "1", "--format", "jsonl", *ks)
    assert json.loads(out)["key"] == "alice"

    code, _, err = _run(capsys, "top", "cli_orders", "--by", "city", *ks)
    assert code == 2 and "not a number to rank by" in err
    code, _, err = _run(capsys, "top", "cli_orders", "--by", "nope", *ks)
    assert code == 2 and "its measures are n (count), total (sum)" in err
    StoreBuilder(session, "cli_counts").with_keyspace(keyspace).partitioned_key_value_store(2).create().put("w", 3)
    code, _, err = _run(capsys, "top", "cli_counts", "--by", "n", *ks)
    assert code == 2 and "--by names a measure of an aggregate store" in err
    assert _run(capsys, "top", "cli_counts", "--format", "csv", *ks)[1] == "key,value\nw,3\n"  # as before
