"""An aggregate store filled through the library, for the readers' tests: a key-value store whose
registry value format names its measures, its values written as accumulators by the codec."""

from __future__ import annotations

import datasketches

from statestore.core.aggregation.kinds.distinct import LG_K
from statestore.core.aggregation.kinds.latest import LatestValue
from statestore.core.windows import WindowSpec
from statestore.store.builder import StoreBuilder

MEASURES = "n=count(), total=sum(amount), units=sum_int(qty), lo=min(amount), hi=max(amount), city=latest(city), "
MEASURES += "users=distinct(user)"
BIG = 2**70 + 3  # a sum_int past a long: exact to every reader


def _sketch(*users: str) -> bytes:
    sketch = datasketches.hll_sketch(LG_K, datasketches.tgt_hll_type.HLL_8)
    for user in users:
        sketch.update(user)
    return sketch.serialize_compact()


# key -> the accumulators written
ACCUMULATORS = {
    "alice": {
        "n": 5,
        "total": 12.5,
        "units": BIG,
        "lo": 0.5,
        "hi": 7.0,
        "city": LatestValue(9, 0, 3, '"Zürich"'),
        "users": _sketch("u1", "u2"),
    },
    "bob": {
        "n": 9,
        "total": -3.25,
        "units": 4,
        "lo": -5.0,
        "hi": 1.75,
        "city": LatestValue(8, 1, 2, '{"id": 7}'),
        "users": _sketch("u3"),
    },
    "carol": {
        "n": 2,
        "total": 100.0,
        "units": -6,
        "lo": 40.0,
        "hi": 60.0,
        "city": LatestValue(7, 0, 1, "42"),
        "users": _sketch("u1", "u2", "u3"),
    },
    "dave": {"n": 9, "total": 0.0, "units": 0},  # the rest: each measure's identity (no min, max, latest)
}


def fill(session, keyspace: str, name: str, partitions: int | None = 3):
    """A partitioned (or, `partitions` None, global) aggregate store named `name`, holding
    ACCUMULATORS; returns (the store, {key: {measure: result}} as every reader should show it)."""
    builder = StoreBuilder(session, name).with_keyspace(keyspace).with_value_codec("aggregate:" + MEASURES)
    store = builder.global_key_value_store() if partitions is None else builder.partitioned_key_value_store(partitions)
    store.create()
    codec = store.value_codec
    store.put_all(list(ACCUMULATORS.items()))
    return store, {key: codec.decode(codec.encode(value)) for key, value in ACCUMULATORS.items()}


MINUTE = 60_000
START = 1_795_946_400_000  # a minute's start
# (key, window start) -> the accumulators written: three one-minute windows, the newest first
WINDOW_ACCUMULATORS = {
    ("alice", START + 2 * MINUTE): ACCUMULATORS["alice"],
    ("bob", START + 2 * MINUTE): ACCUMULATORS["bob"],
    ("alice", START + MINUTE): ACCUMULATORS["carol"],
    ("carol", START + MINUTE): ACCUMULATORS["dave"],
    ("bob", START): ACCUMULATORS["alice"],
}


def fill_windows(session, keyspace: str, name: str):
    """A partitioned-window aggregate store of one-minute tumbling windows named `name`, holding
    WINDOW_ACCUMULATORS (no stream time: every window retained); returns (the store, {(key,
    window start): {measure: result}} as every reader should show it)."""
    builder = StoreBuilder(session, name).with_keyspace(keyspace).with_value_codec("aggregate:" + MEASURES)
    store = builder.partitioned_window_store(WindowSpec(MINUTE), 3).create()
    codec = store.value_codec
    for (key, start), value in WINDOW_ACCUMULATORS.items():
        assert store.put(key, value, start, stream_time_ms=None)
    return store, {window: codec.decode(codec.encode(value)) for window, value in WINDOW_ACCUMULATORS.items()}


GAP = MINUTE  # the session stores' inactivity gap
# (key, session start, session end) -> the accumulators written: alice's two sessions far more than
# the gap apart, the one that ended last first
SESSION_ACCUMULATORS = {
    ("carol", START + 3 * MINUTE, START + 4 * MINUTE): ACCUMULATORS["dave"],
    ("alice", START + 2 * MINUTE, START + 2 * MINUTE + 30_000): ACCUMULATORS["carol"],
    ("bob", START + MINUTE, START + MINUTE + 45_000): ACCUMULATORS["bob"],
    ("alice", START, START + 20_000): ACCUMULATORS["alice"],
}


def fill_sessions(session, keyspace: str, name: str):
    """A partitioned-session aggregate store (gap GAP) named `name`, holding SESSION_ACCUMULATORS
    written through the session table (no stream time: every session retained); returns (the
    store, {(key, session start, session end): {measure: result}} as every reader should show it)."""
    from statestore.core.windows import SessionSpec
    from statestore.store.session import SessionKey

    builder = StoreBuilder(session, name).with_keyspace(keyspace).with_value_codec("aggregate:" + MEASURES)
    store = builder.partitioned_session_store(SessionSpec(GAP), 3).create()
    codec = store.value_codec
    for (key, start, end), value in SESSION_ACCUMULATORS.items():
        assert store.put(SessionKey(key, start, end), value, stream_time_ms=None)
    return store, {s: codec.decode(codec.encode(value)) for s, value in SESSION_ACCUMULATORS.items()}
