"""The aggregate apply's rule against a brute-force truth: batches applied in order, each one
maybe cut short (some of its writes landed) and run again, with every measure of a store."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statestore.core.aggregation import AggregateDelta, AggregateSpec, plan_aggregates
from statestore.core.model import Entry
from tests.unit.core.aggregation.partials import partial_of, truth_of

SPEC = AggregateSpec.parse("n=count(), total=sum_int(v), s=sum(v), hi=max(v), lo=min(v), last=latest(v), u=distinct(v)")
KEYS = [b"a", b"b", b"c"]


def deltas_of(batch):
    by_key: dict[bytes, list] = {}
    for key, record in batch:
        by_key.setdefault(key, []).append(record)
    return [
        AggregateDelta(
            key,
            tuple(m.aggregation.from_partial(partial_of(m.kind, rs)) for m in SPEC.measures),
            max(r[0] for r in rs),
            len(rs),
        )
        for key, rs in by_key.items()
    ]


record = st.tuples(st.integers(0, 9), st.integers(0, 1), st.integers(0, 10**6), st.integers(-50, 50))
batches = st.lists(st.lists(st.tuples(st.sampled_from(KEYS), record), max_size=8), min_size=1, max_size=5)


@settings(max_examples=80, deadline=None)
@given(
    batches=batches,
    cuts=st.lists(st.integers(0, 8), min_size=5, max_size=5),
    cut=st.lists(st.booleans(), min_size=5, max_size=5),
)
def test_replays_of_half_written_batches_give_the_truth(batches, cuts, cut):
    # Offsets unique per partition, as Kafka's are.
    seen, unique = set(), []
    for batch in batches:
        kept = [(k, r) for k, r in batch if (r[1], r[2]) not in seen and not seen.add((r[1], r[2]))]
        unique.append(kept)
    store: dict[bytes, Entry] = {}
    for batch_id, batch in enumerate(unique):
        deltas = deltas_of(batch)
        writes, _ = plan_aggregates(SPEC, store, deltas, batch_id)
        if cut[batch_id]:  # the first attempt died after some writes; the replay plans again
            for entry in writes[: cuts[batch_id]]:
                store[entry.key] = entry
            writes, skipped = plan_aggregates(SPEC, store, deltas, batch_id)
            assert skipped == min(cuts[batch_id], len(deltas))
        for entry in writes:
            store[entry.key] = entry
    for key in KEYS:
        rs = [r for batch in unique for k, r in batch if k == key]
        if not rs:
            assert key not in store
            continue
        got = SPEC.codec.decode(store[key].value)
        assert got["n"] == truth_of("count", rs)
        assert got["total"] == truth_of("sum_int", rs)
        assert math.isclose(got["s"], truth_of("sum", rs), abs_tol=1e-9)
        assert (got["hi"], got["lo"], got["last"]) == (truth_of("max", rs), truth_of("min", rs), truth_of("latest", rs))
        assert got["u"] == pytest.approx(truth_of("distinct", rs), abs=0.5)
        assert store[key].time_ms == max(r[0] for r in rs)


def test_a_key_older_than_the_retention_starts_from_the_identity():
    old = Entry(b"a", SPEC.pack(SPEC.merge(SPEC.identity(), deltas_of([(b"a", (1, 0, 1, 7))])[0].accumulators)), 0, 1)
    delta = deltas_of([(b"a", (9, 0, 2, 3))])[0]
    (entry,), _ = plan_aggregates(SPEC, {b"a": old}, [delta], 1, cutoff_ms=5)
    assert SPEC.codec.decode(entry.value)["n"] == 1
    (entry,), _ = plan_aggregates(SPEC, {b"a": old}, [delta], 1, cutoff_ms=None)
    assert SPEC.codec.decode(entry.value)["n"] == 2


def test_a_later_batchs_entry_is_skipped():
    entry = Entry(b"a", SPEC.pack(SPEC.identity()), 5, 1)
    writes, skipped = plan_aggregates(SPEC, {b"a": entry}, deltas_of([(b"a", (1, 0, 1, 1))]), 4)
    assert (writes, skipped) == ([], 1)
