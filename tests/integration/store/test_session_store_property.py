"""Random operation sequences against the partitioned session store, compared with a map of
(key, start, end) -> value that applies retention by stream time the way the store promises:
a session that ended `retention` or more before the stream time is never returned and takes no
put; find_sessions is Kafka Streams' (end >= earliest end, start <= latest start); dropping
expired segments removes exactly the sessions of segments wholly past retention.

Examples share one store; each works under its own key prefix with its own stream time.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statestore.core.windows import SessionSpec
from statestore.store.builder import StoreBuilder
from statestore.store.session import SessionKey

SESSIONS = SessionSpec(10, grace_ms=3, retention_ms=40, segment_ms=20)
_example = itertools.count()
suffixes = st.text(alphabet="a\u00e9", min_size=1, max_size=2)
bounds = st.tuples(st.integers(0, 120), st.integers(0, 30)).map(lambda t: (t[0], t[0] + t[1]))
values = st.integers(min_value=-(2**63), max_value=2**63 - 1)
puts = st.tuples(st.just("put"), suffixes, bounds, st.one_of(st.none(), values, values, values))
operations = st.lists(
    st.one_of(
        puts,
        puts,
        puts,
        st.tuples(st.just("advance"), st.integers(min_value=0, max_value=60)),
        st.tuples(st.just("remove"), suffixes, bounds),
        st.tuples(st.just("find"), suffixes, st.integers(0, 160), st.integers(0, 160)),
        st.tuples(st.just("fetch"), suffixes),
        st.tuples(st.just("all")),
        st.tuples(st.just("drop")),
    ),
    min_size=20,
    max_size=60,
)


@pytest.fixture(scope="module")
def store(session, keyspace):
    store = StoreBuilder(session, "prop_session").with_keyspace(keyspace).partitioned_session_store(SESSIONS, 4)
    yield store.create()
    session.execute(f"DROP TABLE {keyspace}.{store.spec.table}")
    session.execute(f"DELETE FROM {keyspace}.statestore_stores WHERE name = %s", ("prop_session",))


def _order(t: tuple[str, int, int, int]) -> tuple[bytes, int, int]:
    return t[0].encode("utf-8"), t[2], t[1]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
def test_session_store_behaves_like_a_map_with_retention(store, ops):
    prefix = f"s{next(_example)}:"
    model: dict[tuple[str, int, int], int] = {}
    now = None

    def retained(key=None):
        rows = [(k, s, e, v) for (k, s, e), v in model.items() if not SESSIONS.expired(e, now)]
        return sorted((r for r in rows if key is None or r[0] == key), key=_order)

    def seen(sessions):
        return [(s.key, s.start_ms, s.end_ms, s.value) for s in sessions if s.key.startswith(prefix)]

    for op, *args in ops:
        if op == "put":
            key, (start, end), value = prefix + args[0], args[1], args[2]
            written = store.put(SessionKey(key, start, end), value, stream_time_ms=now)
            assert written == (not SESSIONS.expired(end, now))
            if written and value is None:
                model.pop((key, start, end), None)
            elif written:
                model[(key, start, end)] = value
        elif op == "advance":
            now = (now or 0) + args[0]
        elif op == "remove":
            key, (start, end) = prefix + args[0], args[1]
            store.remove(SessionKey(key, start, end))
            model.pop((key, start, end), None)
        elif op == "find":
            key, earliest_end, latest_start = prefix + args[0], args[1], args[2]
            expected = [r for r in retained(key) if r[2] >= earliest_end and r[1] <= latest_start]
            assert seen(store.find_sessions(key, earliest_end, latest_start, stream_time_ms=now)) == expected
        elif op == "fetch":
            key = prefix + args[0]
            assert seen(store.fetch(key, stream_time_ms=now)) == retained(key)
        elif op == "all":
            assert seen(store.all(stream_time_ms=now)) == retained()
        elif op == "drop":
            store.drop_expired(stream_time_ms=now)
            live = SESSIONS.live_segments_from(now)
            model = {(k, s, e): v for (k, s, e), v in model.items() if SESSIONS.segment_of(e) >= live}
            assert seen(store.all(stream_time_ms=None)) == sorted(
                ((k, s, e, v) for (k, s, e), v in model.items()), key=_order
            )


def test_sessions_are_refused_where_other_stores_are_expected(session, keyspace, store):
    from statestore.core.errors import StoreMismatchError, UnsupportedOperationError
    from statestore.store.builder import open_store, open_window_store

    with pytest.raises(UnsupportedOperationError, match="statestore sessions prop_session"):
        open_store(session, keyspace, "prop_session")
    with pytest.raises(UnsupportedOperationError, match="it has no windows"):
        open_window_store(session, keyspace, "prop_session")
    reopened = StoreBuilder(session, "prop_session").with_keyspace(keyspace)
    with pytest.raises(StoreMismatchError, match="windows or sessions of"):
        reopened.partitioned_session_store(SessionSpec(10, grace_ms=3, retention_ms=80, segment_ms=20), 4).create()
