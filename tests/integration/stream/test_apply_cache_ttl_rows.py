"""The apply cache never vouches for a row read carrying a TTL, on the single-node stack (issue 45,
the residual c9dd5a6 documented): a session written under a table TTL set by CQL alone and removed
before the next plan, read by the next batch (a late record before it) and not rewritten, is not
joined from a file after it expired. Each kind's table tells such rows when its apply reads note
TTLs (statestore.store.tables.base.NotesTtl)."""

from __future__ import annotations

import time
import uuid

import pytest

from statestore.conn.cassandra import DDL_PROFILE
from statestore.core.codecs import decode_long
from statestore.core.model import Entry, StoreSpec, StoreType, WindowedEntry
from statestore.core.windows import SessionSpec, WindowSpec
from statestore.store.tables import create_cql_for, session_table_for, table_for, window_table_for
from statestore.stream.apply_cache import CachePlan
from statestore.stream.apply_sessions import session_applier

GAP = 1_000
TTL_S = 2


def _table(session, spec: StoreSpec) -> str:
    session.execute(create_cql_for(spec), execution_profile=DDL_PROFILE)
    return f"{spec.keyspace}.{spec.table}"


def _ttl(session, table: str, seconds: int) -> None:
    session.execute(f"ALTER TABLE {table} WITH default_time_to_live = {seconds}", execution_profile=DDL_PROFILE)


def _now_us() -> int:
    return time.time_ns() // 1_000


def test_a_session_read_under_a_ttl_removed_before_the_next_plan_does_not_come_back_after_it_expired(
    session, keyspace, cassandra_config, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # the buckets' files (apply_cache._working_directory, no Spark here)
    windowing = SessionSpec(GAP, 60_000, None)
    spec = StoreSpec(
        keyspace, f"ttlrows_{uuid.uuid4().hex[:10]}", StoreType.PARTITIONED_SESSION, 1, windowing=windowing
    )
    table = _table(session, spec)
    try:

        def batch(batch_id, expected, stream_time_ms, times) -> str:
            plan = CachePlan(spec.name, 1, {0: expected} if expected else {})
            apply = session_applier(cassandra_config, spec, batch_id, _now_us(), None, stream_time_ms, plan)
            [stats] = list(apply(iter([("apple", len(times), times[-1], times, 0)])))
            [(_, token)] = stats.cache_tokens
            return token

        # Batch 1 writes apple's session under a TTL set by CQL alone after its plan.
        _ttl(session, table, TTL_S)
        batch(1, None, None, [10_000, 10_100, 10_200])
        _ttl(session, table, 0)  # removed before the next plan: its schema versions differ, it trusts no file
        # Batch 2: a late record before the session reads it (carrying the TTL) and does not rewrite it.
        token = batch(2, None, 10_200, [5_000])
        time.sleep(TTL_S + 0.5)
        # Batch 3 trusts batch 2's file; its record would join the expired session from it.
        batch(3, token, 10_200, [10_300])
        sessions = session_table_for(spec).find_many(
            session, [(b"apple", 0, 2**63 - 1)], session_table_for(spec).segments(session), 1
        )
        stored = {(s.start_ms, s.end_ms): decode_long(s.value) for s in sessions[b"apple"]}
        assert stored == {(5_000, 5_000): 1, (10_300, 10_300): 1}  # not (10 000, 10 300): 4
    finally:
        session.execute(f"DROP TABLE IF EXISTS {table}", execution_profile=DDL_PROFILE)


@pytest.mark.parametrize(
    "store_type, subpartitions",
    [
        (StoreType.PARTITIONED_KV, 1),
        (StoreType.PARTITIONED_KV, 4),
        (StoreType.GLOBAL_KV, 1),
        (StoreType.PARTITIONED_WINDOW, 1),
    ],
)
def test_the_apply_reads_tell_rows_that_carry_a_ttl(session, keyspace, store_type, subpartitions):
    windowing = WindowSpec(10_000) if store_type.windowed else None
    name = f"ttlrows_{uuid.uuid4().hex[:10]}"
    spec = StoreSpec(keyspace, name, store_type, 2, windowing=windowing, subpartitions=subpartitions)
    table = _table(session, spec)
    try:
        kind = window_table_for(spec) if store_type.windowed else table_for(spec)

        def write(key: bytes) -> None:
            if store_type.windowed:
                kind.write(session, [WindowedEntry(key, 0, b"\x01", 1)], 1, None)
            else:
                kind.write_entries(session, [Entry(key, b"\x01", 1)], 1, None)

        def read(reader):
            if store_type.windowed:
                return reader.read(session, [(b"apple", 0), (b"pear", 0)], 1)
            return reader.read_entries(session, [b"apple", b"pear"], 1)

        _ttl(session, table, 600)
        write(b"apple")
        _ttl(session, table, 0)
        write(b"pear")
        noted = read(kind.noting_ttl())
        assert len(noted) == 2
        assert noted.expiring == ({(b"apple", 0)} if store_type.windowed else {b"apple"})
        assert type(read(kind)) is dict  # reads not noting TTLs select no more than before
    finally:
        session.execute(f"DROP TABLE IF EXISTS {table}", execution_profile=DDL_PROFILE)
