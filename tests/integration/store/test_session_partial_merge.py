"""A merge across Cassandra partitions that a task attempt left half written, completed by the
next attempt on the real Cassandra (issue 45 item 3; the rule: tests/unit/stream/
test_session_partial_merge.py; found by the simulator: tests/simulation/test_sessions.py).

A key has two sessions, A in segment s and B in segment s + 1; batch 2's event between them
merges both into one. Its first attempt wrote the merged session (partitioned_session.write_plan
writes it before deleting what it replaces) and died before its deletes. The next attempt, the
stream's own applier, reads all three and must leave the one merged session, each event once."""

from __future__ import annotations

import uuid

from statestore.core.codecs import decode_long, encode_long
from statestore.core.model import SessionEntry
from statestore.core.windows import SessionSpec
from statestore.store.builder import StoreBuilder
from statestore.store.tables import session_table_for
from statestore.store.tables.partitioned_session import SessionChange
from statestore.stream import apply_sessions
from statestore.stream.apply import ApplyStats

SEGMENT, GAP = 60_000, 40_000
BASE = 10 * SEGMENT
T0 = 1_700_000_000_000_000


def test_an_attempt_completes_the_merge_its_predecessor_left_half_written(session, keyspace, cassandra_config):
    name = f"s{uuid.uuid4().hex[:12]}"
    windowing = SessionSpec(GAP, grace_ms=0, segment_ms=SEGMENT)
    store = StoreBuilder(session, name).with_keyspace(keyspace).partitioned_session_store(windowing, 4).create()
    table = session_table_for(store.spec)
    key = b"heron"
    a = SessionEntry(key, BASE, BASE + 10_000, encode_long(2), 1, BASE + 10_000)
    b = SessionEntry(key, BASE + 70_000, BASE + 80_000, encode_long(3), 1, BASE + 80_000)
    merged = SessionEntry(key, BASE, BASE + 80_000, encode_long(6), 2, BASE + 80_000)
    try:
        table.apply(session, [SessionChange((), (a, b))], 4, T0)
        table.apply(session, [SessionChange((), (merged,))], 4, T0 + 1)  # the first attempt, up to its death

        applier = apply_sessions.session_applier(cassandra_config, store.spec, 2, T0 + 1)
        stats = sum(applier(iter([("heron", 1, BASE + 40_000, [BASE + 40_000])])), ApplyStats())

        sessions = [
            (e.start_ms - BASE, e.end_ms - BASE, decode_long(e.value), e.batch_id)
            for e in table.scan(session, table.segments(session))
        ]
        assert sessions == [(0, 80_000, 6, 2)]
        assert stats.written == 1 and stats.skipped == 0
    finally:
        session.execute(f"DROP TABLE {keyspace}.{store.spec.table}")
        session.execute(f"DELETE FROM {keyspace}.statestore_stores WHERE name = %s", (name,))
