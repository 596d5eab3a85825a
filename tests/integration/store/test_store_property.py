"""Random operation sequences against each key-value store type, compared with a sorted map.

Examples share one store per type (Cassandra's heap does not take a table per example); each
example works under its own key prefix, and whole-store scans are filtered to that prefix.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statestore.core.model import StoreType
from statestore.store.builder import StoreBuilder

_example = itertools.count()
# Few, short suffixes so operations collide on the same keys and ranges hit existing entries.
suffixes = st.text(alphabet="ab\u00e9\U0001f600", min_size=1, max_size=3)
values = st.integers(min_value=-(2**63), max_value=2**63 - 1)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), suffixes, values),
        st.tuples(st.just("put_all"), st.lists(st.tuples(suffixes, st.one_of(st.none(), values)), max_size=5)),
        st.tuples(st.just("put_if_absent"), suffixes, values),
        st.tuples(st.just("delete"), suffixes),
        st.tuples(st.just("get"), suffixes),
        st.tuples(st.just("range"), suffixes, suffixes, st.booleans()),
        st.tuples(st.just("prefix"), st.text(alphabet="ab\u00e9", max_size=2)),
        st.tuples(st.just("all"), st.booleans()),
    ),
    min_size=1,
    max_size=25,
)


@pytest.fixture(
    scope="module",
    params=[(StoreType.PARTITIONED_KV, 1), (StoreType.PARTITIONED_KV, 16), (StoreType.GLOBAL_KV, 1)],
    ids=lambda p: p[0].value + (f"-x{p[1]}" if p[1] > 1 else ""),
)
def store(request, session, keyspace):
    store_type, subpartitions = request.param
    suffix = "" if subpartitions == 1 else f"_x{subpartitions}"
    builder = StoreBuilder(session, f"prop_{store_type.name.lower()}{suffix}").with_keyspace(keyspace)
    if store_type is StoreType.PARTITIONED_KV:
        return builder.partitioned_key_value_store(partitions=4, subpartitions=subpartitions).create()
    return builder.global_key_value_store().create()


def _in_order(model: dict[str, int], reverse: bool = False) -> list[tuple[str, int]]:
    return sorted(model.items(), key=lambda kv: kv[0].encode("utf-8"), reverse=reverse)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
def test_store_behaves_like_a_sorted_map(store, ops):
    prefix = f"x{next(_example)}:"
    model: dict[str, int] = {}
    partitioned = store.spec.store_type is StoreType.PARTITIONED_KV

    def mine(pairs):
        return [(k, v) for k, v in pairs if k.startswith(prefix)]

    for op, *args in ops:
        if op == "put":
            store.put(prefix + args[0], args[1])
            model[prefix + args[0]] = args[1]
        elif op == "put_all":
            store.put_all([(prefix + k, v) for k, v in args[0]])
            for k, v in args[0]:
                if v is None:
                    model.pop(prefix + k, None)
                else:
                    model[prefix + k] = v
        elif op == "put_if_absent":
            key = prefix + args[0]
            assert store.put_if_absent(key, args[1]) == model.get(key)
            model.setdefault(key, args[1])
        elif op == "delete":
            assert store.delete(prefix + args[0]) == model.pop(prefix + args[0], None)
        elif op == "get":
            assert store.get(prefix + args[0]) == model.get(prefix + args[0])
        elif op == "range" and partitioned:
            low, high = prefix + args[0], prefix + args[1]
            expected = [kv for kv in _in_order(model) if low.encode() <= kv[0].encode() <= high.encode()]
            if args[2]:
                assert list(store.reverse_range(low, high)) == expected[::-1]
            else:
                assert list(store.range(low, high)) == expected
        elif op == "prefix" and partitioned:
            wanted = (prefix + args[0]).encode()
            assert list(store.prefix_scan(prefix + args[0])) == [
                kv for kv in _in_order(model) if kv[0].encode().startswith(wanted)
            ]
        elif op == "all":
            scan = store.reverse_all() if args[0] else store.all()
            assert mine(scan) == _in_order(model, reverse=args[0])
    assert mine(store.all()) == _in_order(model)
