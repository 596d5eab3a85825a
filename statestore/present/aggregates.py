"""An aggregate store's values as readers show them: one column (or JSON field) per measure.

An aggregate store's value codec (statestore.core.aggregation.spec.AggregateCodec, which the
registry's value format `aggregate:...` names) decodes a value to {measure: result}, in the
measures' order. Every reader shows each measure under its name, beside the key (no measure
is named like a reader's own columns: statestore.core.aggregation.spec.RESERVED_NAMES). `top`
ranks by one numeric measure. Pure: no I/O.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from statestore.core.aggregation.spec import AggregateCodec, AggregateSpec, Measure
from statestore.core.errors import OptionError, UnsupportedOperationError

# What top may rank by: the measures whose result is a number (latest's is any JSON value).
RANKABLE = ("count", "sum", "sum_int", "min", "max", "distinct")


def spec_of(codec: Any) -> AggregateSpec | None:
    """The measures of a store whose value codec is `codec`, or None when it is no aggregate store."""
    return codec.spec if isinstance(codec, AggregateCodec) else None


def columns(spec: AggregateSpec) -> tuple[str, ...]:
    """The column of each measure, in order: its name."""
    return tuple(m.name for m in spec.measures)


def header(spec: AggregateSpec) -> tuple[str, ...]:
    """The CLI's row header of an aggregate store: key, then a column per measure."""
    return ("key", *columns(spec))


def row(key: Any, results: Mapping[str, Any], spec: AggregateSpec) -> tuple:
    """(key, each measure's result in the measures' order)."""
    return (key, *(results[m.name] for m in spec.measures))


def rows(pairs: Iterable[tuple[Any, Mapping[str, Any]]], spec: AggregateSpec) -> Iterator[tuple]:
    return (row(key, results, spec) for key, results in pairs)


def value_text(results: Mapping[str, Any]) -> str:
    """One value on one line (`statestore get`'s default format): a JSON object of the measures,
    in their order, e.g. {"n": 3, "total": 12.5}."""
    return json.dumps(dict(results), ensure_ascii=False)


def rank_measure(spec: AggregateSpec, by: str | None, store: str) -> Measure:
    """The measure `top` ranks store `store` by: `by`, or without it the first count measure.
    OptionError naming the measures when there is none to take, or `by` is not one of them;
    `by` a latest measure (any JSON value, not a number) is refused too."""
    names = ", ".join(f"{m.name} ({m.kind})" for m in spec.measures)
    if by is None:
        found = next((m for m in spec.measures if m.kind == "count"), None)
        if found is None:
            raise OptionError(
                f"store '{store}' has no count measure to rank by: name one of its measures with --by: {names}"
            )
        return found
    found = next((m for m in spec.measures if m.name == by), None)
    if found is None:
        raise OptionError(f"store '{store}' has no measure {by!r}: its measures are {names}")
    if found.kind not in RANKABLE:
        raise OptionError(
            f"measure {by} of store '{store}' is {found.kind}() (any JSON value), not a number to rank by; "
            f"rank by one of {', '.join(m.name for m in spec.measures if m.kind in RANKABLE) or 'none'}"
        )
    return found


def refuse_by(store: str, value_codec: str) -> UnsupportedOperationError:
    """The error of `top --by` on a store that is not an aggregate store."""
    return UnsupportedOperationError(
        f"--by names a measure of an aggregate store; store '{store}' holds {value_codec} values, which top ranks "
        "as they are: leave --by out"
    )


def top_by(pairs: Iterable[tuple[Any, Mapping[str, Any]]], measure: str, limit: int) -> list[tuple[Any, dict]]:
    """The `limit` (key, results) with the highest `measure`, ties by key, a missing result (a
    min or max of no input) last. Keeps only a bounded heap."""
    if limit < 1:
        raise OptionError(f"limit must be at least 1, got {limit}")

    def rank(pair: tuple[Any, Mapping[str, Any]]) -> tuple:
        value = pair[1][measure]
        return (value is None, 0 if value is None else -value, pair[0])

    return heapq.nsmallest(limit, pairs, key=rank)


# -- window aggregate stores: a row per (key, window), the window's bounds before the measures ----

WINDOW_COLUMNS = ("window_start", "window_end")


def window_header(spec: AggregateSpec) -> tuple[str, ...]:
    """The CLI's row header of a window aggregate store: key, window_start, window_end, then a
    column per measure (as `statestore windows` prints a window store's key, bounds and count)."""
    return ("key", *WINDOW_COLUMNS, *columns(spec))


def window_row(key: Any, start_ms: int, end_ms: int, results: Mapping[str, Any], spec: AggregateSpec) -> tuple:
    """(key, window start, window end, each measure's result in the measures' order)."""
    return (key, start_ms, end_ms, *(results[m.name] for m in spec.measures))


def window_text(start_ms: int, end_ms: int, results: Mapping[str, Any]) -> str:
    """One window of one key on one line (`statestore get`'s default format on a window store):
    a JSON object of its bounds and its measures, e.g. {"window_start": 0, "window_end": 60000, "n": 3}."""
    return json.dumps({"window_start": start_ms, "window_end": end_ms, **results}, ensure_ascii=False)


def top_windows(
    latest: Iterable[tuple[int, Iterable[tuple[Any, Mapping[str, Any]]]]], measure: str, limit: int
) -> list[tuple[int, list[tuple[Any, dict]]]]:
    """Each of the `latest` windows (start, its (key, results)) with its `limit` keys of the
    highest `measure` (top_by's order), the windows in the order given."""
    return [(start, top_by(pairs, measure, limit)) for start, pairs in latest]


# -- session aggregate stores: a row per (key, session), the session's bounds before the measures --

SESSION_COLUMNS = ("session_start", "session_end")


def session_header(spec: AggregateSpec) -> tuple[str, ...]:
    """The CLI's row header of a session aggregate store: key, session_start, session_end, then a
    column per measure (as `statestore sessions` prints a session store's key, bounds and count);
    its rows are window_row's (key, bounds, the measures)."""
    return ("key", *SESSION_COLUMNS, *columns(spec))


def session_text(start_ms: int, end_ms: int, results: Mapping[str, Any]) -> str:
    """One session of one key on one line (`statestore get`'s default format on a session store):
    a JSON object of its bounds (both inclusive) and its measures (or count), e.g.
    {"session_start": 0, "session_end": 45000, "n": 3}."""
    return json.dumps({"session_start": start_ms, "session_end": end_ms, **results}, ensure_ascii=False)


def top_sessions(sessions: Iterable[tuple[Any, int, int, Any]], measure: str | None, limit: int) -> list[tuple]:
    """The `limit` sessions (key, start, end, value) with the highest `measure` of their results
    ({measure: result}; `measure` None: the value itself, a count), ties by key then start, a
    missing result (a min or max of no input) last. Keeps only a bounded heap."""
    if limit < 1:
        raise OptionError(f"limit must be at least 1, got {limit}")

    def rank(found: tuple[Any, int, int, Any]) -> tuple:
        value = found[3] if measure is None else found[3][measure]
        return (value is None, 0 if value is None else -value, found[0], found[1])

    return heapq.nsmallest(limit, sessions, key=rank)


def latest_sessions(sessions: Iterable[Any], limit: int) -> list:
    """The `limit` sessions (each with key, start_ms and end_ms) that ended last, ties by key then
    start: the store page's latest sessions of a session aggregate store, whose values (measures)
    do not rank. Keeps only a bounded heap."""
    if limit < 1:
        raise OptionError(f"limit must be at least 1, got {limit}")
    return heapq.nsmallest(limit, sessions, key=lambda s: (-s.end_ms, s.key, s.start_ms))
