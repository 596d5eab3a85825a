"""What an aggregate store's input says it holds, and how its entries are judged against it.

The recount runs the stream's own stages over every record up to the store's position at once
(statestore.stream.json_input.parsed_records, then statestore.stream.aggregates.partials): the
same keys, the same dead-letter rules, one partial accumulator per key and measure, which the
measure's own from_partial turns into the accumulator the store should hold. The judge
(pure) compares each entry with it measure by measure, by the rule of its aggregation:

- count, sum_int, min, max, latest: their results exactly;
- sum (doubles): within SUM_RELATIVE_TOLERANCE relative, since Spark adds a batch's records in
  an order of its choosing and the stream adds its batches' partials one after another;
- distinct: the HLL sketches' estimates once each is merged with itself. The merge is a union,
  exact on the registers, and a union's estimate depends on its registers alone; a sketch built
  in one pass (Spark's) estimates from its update history instead, so its bare estimate may
  differ from that of the same registers reached through merges.

With an expiry cutoff (the expire job's, or the store's retention) a key whose input has times
before it may have been forgotten and counted anew from any later batch: such a key is not
compared (its number is reported); one whose input is all before it may be absent.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from statestore.core.aggregation import AggregateSpec
from statestore.core.errors import CodecError

SUM_RELATIVE_TOLERANCE = 1e-9

# How each aggregation's stored result is compared with the recount's (the report names it).
RULES = {
    "count": "exact",
    "sum_int": "exact",
    "min": "exact",
    "max": "exact",
    "latest": "exact (the latest record's value)",
    "sum": f"within {SUM_RELATIVE_TOLERANCE:g} relative",
    "distinct": "the sketches' estimates, each merged with itself (exact on the registers)",
}


@dataclass(frozen=True)
class Finding:
    """One way an entry differs from the recount: kind is missing, unexpected, unreadable,
    measure (then `measure` names it) or time; stored and expected are results (or times)."""

    kind: str
    measure: str | None = None
    stored: Any = None
    expected: Any = None


def comparable(aggregate: AggregateSpec, accumulators: Sequence) -> dict[str, Any]:
    """Each measure's result as the judge compares it: its finished result, and for distinct
    the estimate of the sketch merged with itself (see the module doc)."""
    results = {}
    for measure, accumulator in zip(aggregate.measures, accumulators, strict=True):
        kind = measure.aggregation
        if measure.kind == "distinct":
            accumulator = kind.merge(accumulator, accumulator)
        results[measure.name] = kind.finish(accumulator)
    return results


def same(kind: str, stored: Any, expected: Any) -> bool:
    """Whether a stored result equals the recount's by its aggregation's rule (RULES)."""
    if kind == "sum":
        return stored == expected or math.isclose(stored, expected, rel_tol=SUM_RELATIVE_TOLERANCE, abs_tol=0.0)
    return stored == expected


def judge_entry(
    aggregate: AggregateSpec,
    stored_value: bytes | None,
    stored_time_ms: int | None,
    expected: Sequence | None,
    expected_time_ms: int | None,
    first_ms: int | None = None,
    cutoff_ms: int | None = None,
) -> Iterator[Finding]:
    """Pure: how one key's entry (its value bytes and time; None: no entry) differs from the
    recount's accumulators (None: no input) and their latest time. `first_ms`: the key's
    earliest input time, needed only with an expiry `cutoff_ms`."""
    if stored_value is None:
        if expected is not None and (cutoff_ms is None or (expected_time_ms or 0) >= cutoff_ms):
            yield Finding("missing", expected=aggregate.finish(expected))
        return
    try:
        accumulators = aggregate.unpack(stored_value)
    except CodecError as exc:
        yield Finding("unreadable", stored=str(exc))
        return
    if expected is None:
        yield Finding("unexpected", stored=aggregate.finish(accumulators))
        return
    if cutoff_ms is not None and first_ms is not None and first_ms < cutoff_ms:
        return  # it may have been forgotten and counted anew since (the module doc)
    stored, recounted = comparable(aggregate, accumulators), comparable(aggregate, expected)
    finished = aggregate.finish(accumulators), aggregate.finish(expected)
    for measure in aggregate.measures:
        name = measure.name
        if not same(measure.kind, stored[name], recounted[name]):
            yield Finding("measure", name, finished[0][name], finished[1][name])
    if expected_time_ms is not None and stored_time_ms != expected_time_ms:
        yield Finding("time", stored=stored_time_ms, expected=expected_time_ms)


def measures_checked(aggregate: AggregateSpec) -> list[dict]:
    """The measures as the report lists them: name, aggregation, field and comparison rule."""
    return [
        {"measure": m.name, "aggregation": m.kind, "field": m.field, "compared": RULES[m.kind]}
        for m in aggregate.measures
    ]


def entry_problems(aggregate: AggregateSpec, value: bytes | None) -> str | None:
    """What AggregateSpec.problems finds wrong with one stored value (its measures' own checks
    and min <= max), as one text; None when nothing. The Great Expectations suite expects it
    None for every entry (statestore.maintenance.validate.quality)."""
    if value is None:
        return "no value"
    try:
        found = aggregate.problems(aggregate.unpack(value))
    except CodecError as exc:
        return str(exc)
    return "; ".join(found) or None
