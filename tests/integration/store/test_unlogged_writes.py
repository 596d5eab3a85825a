"""The write path on the real Cassandra: every row of a write lands with the write timestamp it
was given (replay safety and fencing rest on it), so an older timestamp cannot overwrite it,
for each store type written in prepared UNLOGGED batches."""

from __future__ import annotations

import uuid

import pytest

from statestore.core.codecs import decode_long, encode_long
from statestore.core.model import Entry, SessionEntry, StoreSpec, StoreType, WindowedEntry
from statestore.core.windows import SessionSpec, WindowSpec
from statestore.store.builder import StoreBuilder
from statestore.store.provision import provision_store
from statestore.store.tables import session_table_for, table_for, window_table_for
from statestore.store.tables.partitioned_session import SessionChange

T0 = 1_700_000_000_000_000
ROWS = 64 * 3 + 37  # full batches and a remainder cut into several sizes


def _writetimes(session, table: str) -> dict[bytes, int]:
    return {r.key: r.wt for r in session.execute(f"SELECT key, WRITETIME(value) AS wt FROM {table}")}


@pytest.mark.parametrize("kind", [StoreType.PARTITIONED_KV, StoreType.GLOBAL_KV])
def test_key_value_rows_carry_their_write_timestamp(session, keyspace, kind):
    spec = provision_store(session, StoreSpec(keyspace, f"u{uuid.uuid4().hex[:12]}", kind, 4))
    table = table_for(spec)
    keys = [f"word-{i}".encode() for i in range(ROWS)]
    try:
        table.write_entries(session, [Entry(k, encode_long(i), 5, None) for i, k in enumerate(keys)], 8, T0)
        table.write_entries(session, [Entry(k, encode_long(-1), 4, None) for k in keys], 8, T0 - 1)  # older: loses
        found = table.read_entries(session, keys, 8)
        assert {k: decode_long(e.value) for k, e in found.items()} == {k: i for i, k in enumerate(keys)}
        assert {e.batch_id for e in found.values()} == {5}
        assert _writetimes(session, f"{keyspace}.{spec.table}") == dict.fromkeys(keys, T0)
    finally:
        session.execute(f"DROP TABLE {keyspace}.{spec.table}")


def test_window_rows_carry_their_write_timestamp(session, keyspace):
    windowing = WindowSpec(10, 10, grace_ms=0, retention_ms=10_000, segment_ms=1_000)
    name = f"w{uuid.uuid4().hex[:12]}"
    store = StoreBuilder(session, name).with_keyspace(keyspace).partitioned_window_store(windowing, 4).create()
    table = window_table_for(store.spec)
    windows = [(f"word-{i % 50}".encode(), (i // 50) * 10) for i in range(ROWS)]
    try:
        table.write(session, [WindowedEntry(k, s, encode_long(7), 5, None) for k, s in windows], 8, T0)
        table.write(session, [WindowedEntry(k, s, encode_long(-1), 4, None) for k, s in windows], 8, T0 - 1)
        found = table.read(session, windows, 8)
        assert sorted(found) == sorted(windows)
        assert {decode_long(e.value) for e in found.values()} == {7}
        rows = session.execute(f"SELECT WRITETIME(value) AS wt FROM {keyspace}.{store.spec.table}")
        assert [r.wt for r in rows] == [T0] * ROWS
    finally:
        session.execute(f"DROP TABLE {keyspace}.{store.spec.table}")
        session.execute(f"DELETE FROM {keyspace}.statestore_stores WHERE name = %s", (name,))


def test_session_changes_land_whole_at_their_write_timestamp(session, keyspace):
    """A change that adds one session rides in a prepared UNLOGGED batch with others of its
    partition; merges within one partition (deletes and a write, and two new sessions of one
    key) share UNLOGGED batch statements, never cut; several new sessions of one key ride in
    prepared batches, never cut; a merge across segments is LOGGED alone.
    Every row lands, at the given timestamp."""
    windowing = SessionSpec(10, grace_ms=0, retention_ms=10_000, segment_ms=1_000)
    name = f"s{uuid.uuid4().hex[:12]}"
    store = StoreBuilder(session, name).with_keyspace(keyspace).partitioned_session_store(windowing, 4).create()
    table = session_table_for(store.spec)
    keys = [f"word-{i}".encode() for i in range(ROWS)]
    merged = [f"merged-{i}".encode() for i in range(ROWS)]
    olds = [SessionEntry(k, 0, 5, encode_long(2), 3, 5) for k in merged]
    across = SessionEntry(b"across", 995, 995, encode_long(4), 3, 995)  # segment 0; its merge ends in segment 1
    try:
        table.apply(session, [SessionChange((), (old,)) for old in [*olds, across]], 8, T0 - 10)
        singles = [SessionChange((), (SessionEntry(k, 100, 100, encode_long(1), 5, 100),)) for k in keys]
        merges = [SessionChange((old,), (SessionEntry(old.key, 0, 12, encode_long(3), 5, 12),)) for old in olds]
        two_new = tuple(SessionEntry(b"pair", t, t, encode_long(1), 5, t) for t in (300, 400))
        pairs = SessionChange((), two_new)
        spanning = SessionChange((across,), (SessionEntry(b"across", 995, 1003, encode_long(5), 5, 1003),))
        # Several new sessions of one key: atoms of small rows (topped up with the singles, or
        # padded once none is left), and of a key too long for them (row by row).
        several = {f"several-{n}".encode(): n for n in (3, 5, 7, 2, 3, 6, 64)}
        several[b"long-" * 20] = 3
        adds = [
            SessionChange((), tuple(SessionEntry(k, 10 * t, 10 * t, encode_long(t + 1), 5, 10 * t) for t in range(n)))
            for k, n in several.items()
        ]
        table.apply(session, [*singles, *merges, pairs, spanning, *adds], 8, T0)
        stale = [SessionChange((), (SessionEntry(k, 100, 100, encode_long(-1), 4, 100),)) for k in keys]
        table.apply(session, stale, 8, T0 - 1)  # older: loses
        asks = [(k, 0, 2000) for k in [*keys, *merged, b"pair", b"across", *several]]
        found = table.find_many(session, asks, table.segments(session), 8)
        assert {k: [(e.start_ms, e.end_ms, decode_long(e.value)) for e in v] for k, v in found.items()} == {
            **{k: [(100, 100, 1)] for k in keys},
            **{k: [(0, 12, 3)] for k in merged},
            b"pair": [(300, 300, 1), (400, 400, 1)],
            b"across": [(995, 1003, 5)],
            **{k: [(10 * t, 10 * t, t + 1) for t in range(n)] for k, n in several.items()},
        }
        rows = session.execute(f"SELECT WRITETIME(value) AS wt FROM {keyspace}.{store.spec.table}")
        assert [r.wt for r in rows] == [T0] * (2 * ROWS + 3 + sum(several.values()))
    finally:
        session.execute(f"DROP TABLE {keyspace}.{store.spec.table}")
        session.execute(f"DELETE FROM {keyspace}.statestore_stores WHERE name = %s", (name,))
