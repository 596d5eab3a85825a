"""The replay-safe apply on a real Cassandra: a batch that runs again changes nothing."""

from __future__ import annotations

import pytest

from statestore.core.codecs import decode_long
from statestore.core.model import StoreSpec, StoreType
from statestore.store.provision import provision_store
from statestore.store.tables import table_for
from statestore.stream.apply import Delta, apply_deltas


def _values(session, spec):
    return {e.key: decode_long(e.value) for e in table_for(spec).scan_sorted(session)}


@pytest.mark.parametrize("store_type", [t for t in StoreType if not t.timed])
def test_replayed_batch_does_not_double_count(session, keyspace, store_name, store_type):
    spec = provision_store(session, StoreSpec(keyspace, store_name, store_type, 3))
    batch0 = [Delta(f"k{i}".encode(), i + 1, 1000 + i) for i in range(500)]
    stats = apply_deltas(session, spec, 0, batch0, concurrency=32, write_ts=1)
    assert (stats.written, stats.skipped) == (500, 0)
    again = apply_deltas(session, spec, 0, batch0, concurrency=32, write_ts=1)
    assert (again.written, again.skipped) == (0, 500)
    assert _values(session, spec) == {d.key: d.amount for d in batch0}


@pytest.mark.parametrize("store_type", [t for t in StoreType if not t.timed])
def test_replay_after_a_partial_first_attempt_completes_exactly(session, keyspace, store_name, store_type):
    spec = provision_store(session, StoreSpec(keyspace, store_name, store_type, 4))
    keys = [f"w{i}".encode() for i in range(300)]
    apply_deltas(session, spec, 0, [Delta(k, 10, None) for k in keys], concurrency=16, write_ts=1000)
    batch1 = [Delta(k, 5, 2000) for k in keys]
    # The first attempt of batch 1 dies after writing a third of its keys...
    apply_deltas(session, spec, 1, batch1[:100], concurrency=16, write_ts=2000)
    # ...and the replay of batch 1 finishes the rest, without re-adding the first third.
    replay = apply_deltas(session, spec, 1, batch1, concurrency=16, write_ts=2000)
    assert (replay.written, replay.skipped) == (200, 100)
    assert set(_values(session, spec).values()) == {15}
    entry = table_for(spec).get(session, keys[0])
    assert (entry.batch_id, entry.time_ms) == (1, 2000)


def test_point_get_uses_the_writers_partition(session, keyspace, store_name):
    spec = provision_store(session, StoreSpec(keyspace, store_name, StoreType.PARTITIONED_KV, 7))
    apply_deltas(session, spec, 0, [Delta("école".encode(), 3, None)], concurrency=1, write_ts=1)
    table = table_for(spec)
    row = session.execute(
        f"SELECT partition FROM {keyspace}.{spec.table} WHERE partition = %s AND key = %s",
        (table.partition_of("école".encode()), "école".encode()),
    ).one()
    assert row is not None
    assert decode_long(table.get(session, "école".encode()).value) == 3
