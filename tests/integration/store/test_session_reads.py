"""The apply's read of many keys' sessions (PartitionedSessionTable.find_many: up to a hundred
keys of one store partition per query, bounded by the lowest earliest end among them) returns,
for every key, exactly what Kafka Streams' findSessions(key, earliestEnd, latestStart) would:
its sessions with end >= its own earliest end and start <= its own latest start, over every
segment, and nothing of another key."""

from __future__ import annotations

import random
import uuid

from statestore.core.codecs import decode_long, encode_long
from statestore.core.model import SessionEntry
from statestore.core.windows import SessionSpec
from statestore.store.builder import StoreBuilder
from statestore.store.tables import session_table_for
from statestore.store.tables.partitioned_session import SessionChange

KEYS = 1_200  # about 300 a store partition: several queries of a hundred keys each


def _sessions_of(rng: random.Random, key: bytes) -> list[SessionEntry]:
    """Up to four sessions, more than the gap (10) apart, over 0..1000 (segments of 100)."""
    sessions, start = [], rng.randrange(0, 200)
    for _ in range(rng.randrange(0, 5)):
        end = start + rng.randrange(0, 150)
        sessions.append(SessionEntry(key, start, end, encode_long(rng.randrange(1, 9)), 1, end))
        start = end + 11 + rng.randrange(0, 150)
    return sessions


def test_many_keys_read_at_once_get_their_own_sessions_only(session, keyspace):
    rng = random.Random(20261127)
    name = f"s{uuid.uuid4().hex[:12]}"
    windowing = SessionSpec(10, grace_ms=0, retention_ms=100_000, segment_ms=100)
    store = StoreBuilder(session, name).with_keyspace(keyspace).partitioned_session_store(windowing, 4).create()
    table = session_table_for(store.spec)
    try:
        stored = {key: _sessions_of(rng, key) for key in (f"k{i}".encode() for i in range(KEYS))}
        table.apply(session, [SessionChange((), (e,)) for entries in stored.values() for e in entries], 16, None)
        asks = []
        for key, entries in stored.items():
            if entries and rng.random() < 0.5:  # bounds exactly at a session's end and start
                pick = rng.choice(entries)
                asks.append((key, pick.end_ms, pick.start_ms))
            else:
                earliest = rng.randrange(0, 900)
                asks.append((key, earliest, earliest + rng.randrange(0, 300)))
        found = table.find_many(session, asks, table.segments(session), 8)

        def shape(entries):
            return sorted((e.start_ms, e.end_ms, decode_long(e.value)) for e in entries)

        expected = {
            key: shape(e for e in stored[key] if e.end_ms >= earliest and e.start_ms <= latest)
            for key, earliest, latest in asks
        }
        assert {key: shape(found.get(key, [])) for key in expected} == expected
        assert set(found) <= set(expected)
        assert sum(map(len, expected.values())) > KEYS // 2  # the bounds leave most keys something
        assert len(table.segments(session)) > 5  # the sessions span many segments
    finally:
        session.execute(f"DROP TABLE {keyspace}.{store.spec.table}")
        session.execute(f"DELETE FROM {keyspace}.statestore_stores WHERE name = %s", (name,))
