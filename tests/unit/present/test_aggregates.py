"""An aggregate store's values as readers show them (statestore.present.aggregates): a column per
measure in every format, `get`'s one line, and what `top` ranks by."""

from __future__ import annotations

import csv
import io
import json

import pytest

from statestore.core import codecs
from statestore.core.aggregation.kinds.latest import LatestValue
from statestore.core.aggregation.spec import AggregateSpec
from statestore.core.errors import OptionError
from statestore.present import aggregates
from statestore.present.text import emit

SPEC = AggregateSpec.parse("n=count(), total=sum(amount), units=sum_int(qty), hi=max(amount), last=latest(city)")


def _value(n, total, units, hi, last):
    codec = SPEC.codec
    return codec.decode(codec.encode({"n": n, "total": total, "units": units, "hi": hi, "last": last}))


def test_the_codec_named_by_the_registry_is_recognised_and_others_are_not():
    assert aggregates.spec_of(codecs.codec_named(SPEC.value_format)) == SPEC
    assert aggregates.spec_of(codecs.LONG) is None and aggregates.spec_of(codecs.BYTES) is None


def test_a_column_per_measure_in_order():
    assert aggregates.header(SPEC) == ("key", "n", "total", "units", "hi", "last")


@pytest.mark.parametrize("fmt", ["table", "csv", "jsonl"])
def test_every_format_shows_each_measure_in_its_column(fmt):
    big = 2**64 + 7  # sum_int is exact beyond a long
    value = _value(3, 12.5, big, 9.25, LatestValue(5, 0, 1, '"Zürich"'))
    empty = _value(1, 0.0, 0, None, None)
    out = io.StringIO()
    emit(aggregates.rows([("a", value), ("b", empty)], SPEC), aggregates.header(SPEC), fmt, out)
    text = out.getvalue()
    if fmt == "jsonl":
        assert [json.loads(line) for line in text.splitlines()] == [
            {"key": "a", "n": 3, "total": 12.5, "units": big, "hi": 9.25, "last": "Zürich"},
            {"key": "b", "n": 1, "total": 0.0, "units": 0, "hi": None, "last": None},
        ]
    elif fmt == "csv":
        assert list(csv.reader(io.StringIO(text))) == [
            ["key", "n", "total", "units", "hi", "last"],
            ["a", "3", "12.5", str(big), "9.25", "Zürich"],
            ["b", "1", "0.0", "0", "", ""],
        ]
    else:
        lines = text.splitlines()
        assert lines[0].split() == ["key", "n", "total", "units", "hi", "last"]
        assert lines[1].split() == ["a", "3", "12.5", str(big), "9.25", "Zürich"]
        assert lines[2].split() == ["b", "1", "0.0", "0"]


def test_get_prints_one_json_object_of_the_measures_in_their_order():
    value = _value(3, 12.5, 4, 9.25, LatestValue(5, 0, 1, '{"id": 7}'))
    assert aggregates.value_text(value) == '{"n": 3, "total": 12.5, "units": 4, "hi": 9.25, "last": {"id": 7}}'


def test_top_ranks_by_the_first_count_unless_told_and_names_the_measures_when_it_cannot():
    assert aggregates.rank_measure(SPEC, None, "s").name == "n"
    assert aggregates.rank_measure(SPEC, "hi", "s").name == "hi"
    no_count = AggregateSpec.parse("total=sum(amount), last=latest(city)")
    with pytest.raises(OptionError, match=r"no count measure .* --by: total \(sum\), last \(latest\)"):
        aggregates.rank_measure(no_count, None, "s")
    with pytest.raises(OptionError, match=r"no measure 'nope': its measures are n \(count\), total \(sum\)"):
        aggregates.rank_measure(SPEC, "nope", "s")
    with pytest.raises(OptionError, match="not a number to rank by"):
        aggregates.rank_measure(SPEC, "last", "s")


def test_top_by_a_measure_highest_first_ties_by_key_missing_last():
    pairs = [("a", {"hi": 2.0}), ("b", {"hi": None}), ("c", {"hi": 5.0}), ("d", {"hi": 2.0}), ("e", {"hi": -1.0})]
    assert [k for k, _ in aggregates.top_by(iter(pairs), "hi", 10)] == ["c", "a", "d", "e", "b"]
    assert [k for k, _ in aggregates.top_by(iter(pairs), "hi", 2)] == ["c", "a"]


@pytest.mark.parametrize("fmt", ["table", "csv", "jsonl"])
def test_a_window_row_shows_its_bounds_then_a_column_per_measure(fmt):
    value = _value(3, 12.5, 4, 9.25, LatestValue(5, 0, 1, '"Zürich"'))
    out = io.StringIO()
    emit([aggregates.window_row("a", 60_000, 120_000, value, SPEC)], aggregates.window_header(SPEC), fmt, out)
    header = ["key", "window_start", "window_end", "n", "total", "units", "hi", "last"]
    cells = ["a", "60000", "120000", "3", "12.5", "4", "9.25", "Zürich"]
    text = out.getvalue()
    if fmt == "jsonl":
        assert json.loads(text) == dict(zip(header, ["a", 60_000, 120_000, 3, 12.5, 4, 9.25, "Zürich"], strict=True))
    elif fmt == "csv":
        assert list(csv.reader(io.StringIO(text))) == [header, cells]
    else:
        assert [line.split() for line in text.splitlines()] == [header, cells]


def test_get_of_a_window_prints_its_bounds_and_measures_as_one_object():
    value = _value(3, 12.5, 4, None, LatestValue(5, 0, 1, '{"id": 7}'))
    assert aggregates.window_text(0, 60_000, value) == (
        '{"window_start": 0, "window_end": 60000, "n": 3, "total": 12.5, "units": 4, "hi": null, "last": {"id": 7}}'
    )


def test_top_of_windows_ranks_each_window_on_its_own():
    latest = [(120_000, [("a", {"hi": 1.0}), ("b", {"hi": 3.0})]), (60_000, [("a", {"hi": 9.0}), ("c", {"hi": None})])]
    ranked = aggregates.top_windows(latest, "hi", 1)
    assert [(start, [k for k, _ in top]) for start, top in ranked] == [(120_000, ["b"]), (60_000, ["a"])]


@pytest.mark.parametrize("fmt", ["table", "csv", "jsonl"])
def test_a_session_row_shows_its_bounds_then_a_column_per_measure(fmt):
    value = _value(3, 12.5, 4, 9.25, LatestValue(5, 0, 1, '"Zürich"'))
    out = io.StringIO()
    emit([aggregates.window_row("a", 1_000, 61_000, value, SPEC)], aggregates.session_header(SPEC), fmt, out)
    header = ["key", "session_start", "session_end", "n", "total", "units", "hi", "last"]
    cells = ["a", "1000", "61000", "3", "12.5", "4", "9.25", "Zürich"]
    text = out.getvalue()
    if fmt == "jsonl":
        assert json.loads(text) == dict(zip(header, ["a", 1_000, 61_000, 3, 12.5, 4, 9.25, "Zürich"], strict=True))
    elif fmt == "csv":
        assert list(csv.reader(io.StringIO(text))) == [header, cells]
    else:
        assert [line.split() for line in text.splitlines()] == [header, cells]


def test_get_of_a_session_prints_its_bounds_and_measures_as_one_object():
    value = _value(3, 12.5, 4, None, LatestValue(5, 0, 1, '{"id": 7}'))
    assert aggregates.session_text(0, 45_000, value) == (
        '{"session_start": 0, "session_end": 45000, "n": 3, "total": 12.5, "units": 4, "hi": null, "last": {"id": 7}}'
    )
    assert aggregates.session_text(5, 9, {"count": 2}) == '{"session_start": 5, "session_end": 9, "count": 2}'


def test_top_of_sessions_ranks_by_the_measure_ties_by_key_then_start_missing_last():
    found = [
        ("b", 50, 60, {"hi": 2.0}),
        ("a", 70, 80, {"hi": 2.0}),
        ("a", 10, 20, {"hi": 2.0}),
        ("c", 0, 5, {"hi": None}),
        ("d", 0, 5, {"hi": 9.5}),
    ]
    ranked = aggregates.top_sessions(iter(found), "hi", 10)
    assert [(k, s) for k, s, _, _ in ranked] == [("d", 0), ("a", 10), ("a", 70), ("b", 50), ("c", 0)]
    assert [(k, s) for k, s, _, _ in aggregates.top_sessions(iter(found), "hi", 2)] == [("d", 0), ("a", 10)]
    counts = [("x", 0, 1, 3), ("y", 5, 6, 7), ("x", 9, 9, 7)]
    assert [(k, s) for k, s, _, _ in aggregates.top_sessions(iter(counts), None, 2)] == [("x", 9), ("y", 5)]


def test_the_latest_sessions_are_those_that_ended_last_ties_by_key_then_start():
    from statestore.store.session import SessionValue

    found = [SessionValue("b", 5, 50, {}), SessionValue("a", 40, 50, {}), SessionValue("a", 0, 90, {})]
    found.append(SessionValue("a", 0, 10, {}))
    assert [(s.key, s.start_ms) for s in aggregates.latest_sessions(iter(found), 3)] == [("a", 0), ("a", 40), ("b", 5)]


def test_the_librarys_latest_sessions_of_an_aggregate_store_tie_without_comparing_measures(monkeypatch):
    """admin.latest_sessions ranked ties by value: two sessions of an aggregate store ending
    together compared their measures' dicts (TypeError)."""
    from statestore.store import admin
    from statestore.store.session import SessionValue

    found = [
        SessionValue("a", 0, 50, {"n": 2}),
        SessionValue("b", 10, 50, {"n": 3}),
        SessionValue("c", 0, 10, {"n": 1}),
    ]

    class Opened:
        def all(self):
            return iter(found)

    monkeypatch.setattr(admin, "open_session_store", lambda session, keyspace, name: Opened())
    assert {s.key for s in admin.latest_sessions(None, "ks", "visits", 2)} == {"a", "b"}
    counts = [SessionValue("a", 0, 50, 2), SessionValue("b", 10, 50, 3)]
    monkeypatch.setattr(Opened, "all", lambda self: iter(counts))
    assert [s.key for s in admin.latest_sessions(None, "ks", "words", 2)] == ["b", "a"]  # more events first
