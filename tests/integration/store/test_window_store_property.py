"""Random operation sequences against the partitioned window store, compared with a map of
(key, window start) -> value that applies retention by stream time the way the store promises:
a window that started `retention` or more before the stream time is never returned and takes no
put; dropping expired segments removes exactly the windows of segments wholly past retention.

Examples share one store (Cassandra's heap does not take a table per example); each example
works under its own key prefix and passes its own stream time to every call.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statestore.core.windows import WindowSpec
from statestore.store.builder import StoreBuilder

WINDOWING = WindowSpec(10, 5, grace_ms=3, retention_ms=40, segment_ms=20)
_example = itertools.count()
# Few keys and starts on a coarse grid, so operations meet the same windows; spans are wide.
suffixes = st.text(alphabet="a\u00e9", min_size=1, max_size=2)
starts = st.integers(min_value=0, max_value=24).map(lambda n: n * 5)
spans = st.tuples(starts, st.integers(min_value=0, max_value=120)).map(lambda t: (t[0], t[0] + t[1]))
values = st.integers(min_value=-(2**63), max_value=2**63 - 1)
puts = st.tuples(st.just("put"), suffixes, starts, st.one_of(st.none(), values, values, values))
operations = st.lists(
    st.one_of(
        puts,
        puts,
        puts,
        st.tuples(st.just("advance"), st.integers(min_value=0, max_value=60)),
        st.tuples(st.just("remove"), suffixes, starts),
        st.tuples(st.just("get"), suffixes, starts),
        st.tuples(st.just("fetch"), suffixes, spans, st.booleans()),
        st.tuples(st.just("range"), suffixes, suffixes, spans, st.booleans()),
        st.tuples(st.just("all"), st.booleans()),
        st.tuples(st.just("drop")),
    ),
    min_size=20,
    max_size=60,
)


@pytest.fixture(scope="module")
def store(session, keyspace):
    store = StoreBuilder(session, "prop_window").with_keyspace(keyspace).partitioned_window_store(WINDOWING, 4)
    yield store.create()
    # Later tests list every store of the keyspace: leave none behind.
    session.execute(f"DROP TABLE {keyspace}.{store.spec.table}")
    session.execute(f"DELETE FROM {keyspace}.statestore_stores WHERE name = %s", ("prop_window",))


def _order(key: str, start: int) -> tuple[bytes, int]:
    return key.encode("utf-8"), start


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
def test_window_store_behaves_like_a_map_with_retention(store, ops):
    prefix = f"w{next(_example)}:"
    model: dict[tuple[str, int], int] = {}
    now = None  # this example's stream time

    def retained(items):
        return [(k, s, v) for (k, s), v in items if not WINDOWING.expired(s, now)]

    def seen(windows):
        return [(w.key, w.start_ms, w.value) for w in windows if w.key.startswith(prefix)]

    for op, *args in ops:
        if op == "put":
            key, start, value = prefix + args[0], args[1], args[2]
            written = store.put(key, value, start, stream_time_ms=now)
            assert written == (not WINDOWING.expired(start, now))
            if written and value is None:
                model.pop((key, start), None)
            elif written:
                model[(key, start)] = value
        elif op == "advance":
            now = (now or 0) + args[0]
        elif op == "remove":
            store.remove(prefix + args[0], args[1])
            model.pop((prefix + args[0], args[1]), None)
        elif op == "get":
            key, start = prefix + args[0], args[1]
            expected = None if WINDOWING.expired(start, now) else model.get((key, start))
            assert store.fetch(key, start, stream_time_ms=now) == expected
        elif op == "fetch":
            key, (low, high), backward = prefix + args[0], args[1], args[2]
            expected = sorted((s, v) for k, s, v in retained(model.items()) if k == key and low <= s <= high)
            if backward:
                assert store.backward_fetch(key, low, high, stream_time_ms=now) == expected[::-1]
            else:
                assert store.fetch(key, low, high, stream_time_ms=now) == expected
        elif op == "range":
            low_key, high_key = sorted([prefix + args[0], prefix + args[1]], key=str.encode)
            (low, high), reverse = args[2], args[3]
            expected = sorted(
                (t for t in retained(model.items()) if low_key.encode() <= t[0].encode() <= high_key.encode()),
                key=lambda t: _order(t[0], t[1]),
                reverse=reverse,
            )
            expected = [t for t in expected if low <= t[1] <= high]
            got = store.fetch_range(low_key, high_key, low, high, reverse=reverse, stream_time_ms=now)
            assert seen(got) == expected
        elif op == "all":
            expected = sorted(retained(model.items()), key=lambda t: _order(t[0], t[1]), reverse=args[0])
            assert seen(store.all(reverse=args[0], stream_time_ms=now)) == expected
            assert all(w.end_ms == w.start_ms + WINDOWING.size_ms for w in store.all(stream_time_ms=now))
        elif op == "drop":
            store.drop_expired(stream_time_ms=now)
            live = WINDOWING.live_segments_from(now)
            # Physically left (read without retention): exactly the windows of live segments.
            model = {(k, s): v for (k, s), v in model.items() if WINDOWING.segment_of(s) >= live}
            stored = seen(store.all(stream_time_ms=None))
            assert stored == sorted(((k, s, v) for (k, s), v in model.items()), key=lambda t: _order(t[0], t[1]))


def test_a_window_store_is_refused_where_a_key_value_store_is_expected(session, keyspace, store):
    from statestore.core.errors import StoreMismatchError, UnsupportedOperationError
    from statestore.store.tables import table_for

    with pytest.raises(UnsupportedOperationError, match="it holds windows or sessions"):
        table_for(store.spec)
    reopened = StoreBuilder(session, "prop_window").with_keyspace(keyspace)
    with pytest.raises(StoreMismatchError, match="windows or sessions of"):
        reopened.partitioned_window_store(WindowSpec(10, 5, grace_ms=3, retention_ms=80, segment_ms=20), 4).create()
