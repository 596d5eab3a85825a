"""Random put / delete / get / get-as-of / history / drop-old-versions sequences against both
versioned store types on the real Cassandra, compared with an in-memory model.

The model is deliberately not the library's algorithm: a key's history is a sorted map of
change points {valid_from: value}, each version running to the next change point (the last
one is current). Kafka Streams' put(key, value, t) is then just `points[t] = value` - a put
inside a version splits it, a put at a version's start replaces its value, a put before
every version ends where the first begins - and a delete is a put of None. Dropping old
versions (what maintenance does) removes the oldest change points.

Examples share one store per type (Cassandra's heap does not take a table per example);
each works under its own key prefix, and whole-store scans are filtered to that prefix.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statestore.core.model import StoreType
from statestore.store.builder import StoreBuilder
from statestore.store.versioned import VersionedRecord

_example = itertools.count()
# Few keys and a short time line, so operations collide on the same keys and versions.
suffixes = st.sampled_from(["a", "ab", "b", "é", "\U0001f600"])
times = st.integers(min_value=0, max_value=60)
values = st.integers(min_value=-(2**63), max_value=2**63 - 1)
bounds = st.one_of(st.none(), times)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), suffixes, values, times),
        st.tuples(st.just("put"), suffixes, st.none(), times),  # a None value deletes, as in Kafka
        st.tuples(st.just("delete"), suffixes, times),
        st.tuples(st.just("get"), suffixes),
        st.tuples(st.just("get_as_of"), suffixes, times),
        st.tuples(st.just("history"), suffixes, bounds, bounds),
        st.tuples(st.just("drop_oldest"), suffixes, st.integers(1, 3)),
        st.tuples(st.just("scan"), st.booleans()),
        st.tuples(st.just("range"), suffixes, suffixes),
    ),
    min_size=1,
    max_size=30,
)


class Model:
    """Per key, the sorted change points of its history and their values (None: deleted)."""

    def __init__(self) -> None:
        self.points: dict[str, dict[int, int | None]] = {}

    def _starts(self, key: str) -> list[int]:
        return sorted(self.points.get(key, {}))

    def versions(self, key: str) -> list[VersionedRecord]:
        starts, points = self._starts(key), self.points.get(key, {})
        ends = [*starts[1:], None]  # each version runs to the next change point; the last is current
        return [VersionedRecord(points[s], s, e) for s, e in zip(starts, ends, strict=False)]

    def at(self, key: str, t: int) -> VersionedRecord | None:
        found = [v for v in self.versions(key) if v.valid_from <= t and (v.valid_to is None or t < v.valid_to)]
        return found[0] if found and found[0].value is not None else None

    def latest(self, key: str) -> VersionedRecord | None:
        versions = self.versions(key)
        return versions[-1] if versions and versions[-1].value is not None else None

    def put(self, key: str, value: int | None, t: int) -> int | None:
        self.points.setdefault(key, {})[t] = value
        starts = self._starts(key)
        following = bisect.bisect_right(starts, t)
        return starts[following] if following < len(starts) else None

    def history(self, key: str, from_ms: int | None, to_ms: int | None) -> list[VersionedRecord]:
        def overlaps(v: VersionedRecord) -> bool:
            ends_after = from_ms is None or v.valid_to is None or v.valid_to > from_ms
            return ends_after and (to_ms is None or v.valid_from < to_ms)

        return [v for v in self.versions(key) if overlaps(v)]

    def drop_oldest(self, key: str, n: int) -> list[int]:
        """Drop the `n` oldest versions, never the current one; returns their valid_to."""
        dropped = self.versions(key)[:-1][:n]
        for v in dropped:
            del self.points[key][v.valid_from]
        return [v.valid_to for v in dropped]

    def current(self) -> list[tuple[str, int]]:
        pairs = [(k, v.value) for k in self.points if (v := self.latest(k)) is not None]
        return sorted(pairs, key=lambda kv: kv[0].encode("utf-8"))


@pytest.fixture(
    scope="module",
    params=[
        (StoreType.PARTITIONED_VERSIONED, 1),
        (StoreType.PARTITIONED_VERSIONED, 8),
        (StoreType.GLOBAL_VERSIONED, 1),
    ],
    ids=lambda p: p[0].value + (f"-x{p[1]}" if p[1] > 1 else ""),
)
def store(request, session, keyspace):
    store_type, subpartitions = request.param
    suffix = "" if subpartitions == 1 else f"_x{subpartitions}"
    builder = StoreBuilder(session, f"vprop_{store_type.name.lower()}{suffix}").with_keyspace(keyspace)
    if store_type is StoreType.PARTITIONED_VERSIONED:
        return builder.partitioned_versioned_store(partitions=3, subpartitions=subpartitions).create()
    return builder.global_versioned_store().create()


@settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
def test_versioned_store_behaves_like_a_map_of_version_lists(store, ops):
    prefix = f"v{next(_example)}:"
    model = Model()
    partitioned = store.spec.store_type is StoreType.PARTITIONED_VERSIONED

    def mine(pairs):
        return [(k, v) for k, v in pairs if k.startswith(prefix)]

    for op, *args in ops:
        key = prefix + args[0] if op not in ("scan",) else None
        if op == "put":
            value, t = args[1], args[2]
            assert store.put(key, value, t) == model.put(key, value, t)
        elif op == "delete":
            expected = model.at(key, args[1])
            assert store.delete(key, args[1]) == expected
            model.put(key, None, args[1])
        elif op == "get":
            assert store.get(key) == model.latest(key)
            assert asyncio.run(store.get_async(key)) == model.latest(key)  # the HTTP API's fast path
        elif op == "get_as_of":
            assert store.get(key, as_of=args[1]) == model.at(key, args[1])
        elif op == "history":
            assert list(store.history(key, args[1], args[2])) == model.history(key, args[1], args[2])
        elif op == "drop_oldest":
            valid_tos = model.drop_oldest(key, args[1])
            store.table.delete_versions(store.session, store.key_codec.encode(key), valid_tos)
        elif op == "scan":
            scan = store.reverse_all() if args[0] else store.all()
            assert mine(scan) == (model.current()[::-1] if args[0] else model.current())
        elif op == "range" and partitioned:
            low, high = sorted([prefix + args[0], key], key=lambda k: k.encode("utf-8"))
            wanted = [kv for kv in model.current() if low.encode() <= kv[0].encode() <= high.encode()]
            assert list(store.range(low, high)) == wanted
            assert list(store.reverse_range(low, high)) == wanted[::-1]
            assert list(store.prefix_scan(prefix)) == model.current()
    # Every key: the full history and the current value, and the KV view of the table agrees.
    for key in model.points:
        assert list(store.history(key)) == model.versions(key)
        assert store.get(key) == model.latest(key)
    assert mine(store.all()) == model.current()
    raw = store.table.read_entries(store.session, [k.encode() for k in model.points], 4)
    assert sorted((k.decode(), store.value_codec.decode(e.value)) for k, e in raw.items()) == sorted(model.current())
