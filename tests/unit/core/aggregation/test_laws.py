"""Law tests of every aggregation: identity, associativity and commutativity over random splits
of the input into batches, idempotence where declared, codec round trip, and the result against
a brute-force truth."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statestore.core.aggregation import KINDS
from statestore.core.errors import CodecError
from tests.unit.core.aggregation.partials import partial_of, truth_of

INTEGERS = st.integers(min_value=-(2**63), max_value=2**63 - 1)
NUMBERS = st.integers(min_value=-(10**6), max_value=10**6)  # exact as doubles, so sums compare exactly


def records(values):
    """(time_ms, partition, offset, value) with times that tie, so the tie-break decides."""
    return st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2), st.integers(0, 10**6), values), max_size=30).map(
        lambda rs: [r for i, r in enumerate(rs) if all(r[1:3] != q[1:3] for q in rs[:i])]
    )


VALUES = {
    "count": NUMBERS,
    "sum": NUMBERS,
    "sum_int": INTEGERS,
    "min": NUMBERS,
    "max": NUMBERS,
    "latest": NUMBERS,
    "distinct": st.integers(0, 40),
}


def splits(draw_records):
    """The records and a random cut of them into batches (in any order)."""
    return draw_records.flatmap(
        lambda rs: st.tuples(st.just(rs), st.lists(st.integers(0, 3), min_size=len(rs), max_size=len(rs)))
    )


def accumulate(kind, rs, cut):
    batches = [[r for r, b in zip(rs, cut, strict=True) if b == n] for n in range(4)]
    total = kind.identity()
    for batch in batches:
        if batch:
            total = kind.merge(total, kind.from_partial(partial_of(kind.name, batch)))
    return total


@pytest.mark.parametrize("name", sorted(KINDS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_any_split_into_batches_gives_the_truth(name, data):
    kind = KINDS[name]
    rs, cut = data.draw(splits(records(VALUES[name])))
    result = kind.finish(accumulate(kind, rs, cut))
    truth = truth_of(name, rs)
    if name == "distinct":
        assert result == pytest.approx(truth, rel=0.05, abs=0.5)
    elif name == "sum":
        assert math.isclose(result, truth, rel_tol=1e-12, abs_tol=1e-9)
    else:
        assert result == truth


@pytest.mark.parametrize("name", sorted(KINDS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_identity_associativity_commutativity_and_codec(name, data):
    kind = KINDS[name]
    parts = [kind.from_partial(partial_of(name, data.draw(records(VALUES[name])))) for _ in range(3)]
    a, b, c = parts
    assert kind.merge(kind.identity(), a) == a == kind.merge(a, kind.identity())
    # Equal results; equal accumulators too, but for sketches, whose bytes record how they were built.
    left, right = kind.merge(kind.merge(a, b), c), kind.merge(a, kind.merge(b, c))
    assert kind.finish(left) == kind.finish(right)
    if name != "distinct":
        assert left == right
    assert kind.finish(kind.merge(a, b)) == kind.finish(kind.merge(b, a))
    for accumulator in parts:
        assert kind.decode(kind.encode(accumulator)) == accumulator
    if kind.idempotent:
        assert kind.finish(kind.merge(a, a)) == kind.finish(a)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_stored_accumulator_starts_with_its_version(name):
    kind = KINDS[name]
    data = kind.encode(kind.identity())
    assert data[0] == kind.version
    with pytest.raises(CodecError, match=f"version {kind.version}"):
        kind.decode(bytes((kind.version + 1,)) + data[1:])
    with pytest.raises(CodecError):
        kind.decode(b"")


def test_count_and_sum_are_not_idempotent_so_they_rely_on_the_batch_tag():
    assert {name for name, kind in KINDS.items() if not kind.idempotent} == {"count", "sum", "sum_int"}
    count = KINDS["count"]
    assert count.merge(3, 3) == 6  # a replay merged twice would double it: the plan's tag prevents it


def test_sum_int_never_overflows_a_long():
    kind = KINDS["sum_int"]
    big = kind.merge(kind.from_partial(partial_of("sum_int", [(0, 0, 0, 2**63 - 1)])), 2**63 - 1)
    assert big == 2 * (2**63 - 1)
    assert kind.decode(kind.encode(big)) == big
    assert kind.decode(kind.encode(-big)) == -big


def test_latest_breaks_ties_by_partition_then_offset():
    kind = KINDS["latest"]
    a = kind.from_partial((5, 0, 9, '"a"'))
    b = kind.from_partial((5, 1, 1, '"b"'))
    assert kind.finish(kind.merge(a, b)) == kind.finish(kind.merge(b, a)) == "b"
